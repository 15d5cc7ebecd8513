/** Where the daemon serves MCP over Streamable HTTP; apart, so the daemon routes it without loading the SDK. */
export const MCP_PATH = '/mcp';
