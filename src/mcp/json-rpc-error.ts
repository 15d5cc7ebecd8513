/** How /mcp answers a POST itself, before or instead of the MCP SDK: one JSON-RPC error. */
import type { ServerResponse } from 'node:http';
import { MCP_ERRORS, type McpErrorName } from '../protocol/errors.js';

/**
 * `name`: the error of MCP_ERRORS (its code goes on the wire); `id`: the request's, when the
 * refusal is of one request whose id was read (a task listen).
 */
export function jsonRpcError(
  response: ServerResponse,
  status: number,
  name: McpErrorName,
  message: string,
  id: string | number | null = null,
): void {
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  const error = { code: MCP_ERRORS[name].code, message };
  response.end(JSON.stringify({ jsonrpc: '2.0', id, error }));
}
