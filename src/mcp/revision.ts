/**
 * Which MCP revision a message belongs to, told without loading either SDK:
 * from 2026-07-28 on, every request names its revision in `_meta` (and over
 * HTTP in a header) instead of negotiating it once with initialize.
 */

/** The `_meta` key a 2026-07-28 request names its revision in. */
export const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';
/** The header a Streamable HTTP request names its revision in. */
export const PROTOCOL_VERSION_HEADER = 'mcp-protocol-version';
/** Revisions are ISO dates; this one and later have no initialize and no session. */
export const FIRST_SESSIONLESS_REVISION = '2026-07-28';

/**
 * Whether a message (or any message of a batch) carries the per-request envelope claim.
 * The same rule as the 2.x package's classification: the claim, valid or not, decides;
 * the 2.x side then answers a malformed or unknown one itself.
 */
export function claimsSessionlessRevision(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((message) => {
    if (typeof message !== 'object' || message === null) return false;
    const params = (message as { params?: unknown }).params;
    if (typeof params !== 'object' || params === null) return false;
    const meta = (params as { _meta?: unknown })._meta;
    return typeof meta === 'object' && meta !== null && PROTOCOL_VERSION_META_KEY in meta;
  });
}

/** Whether an HTTP protocol-version header names 2026-07-28 or later. */
export function isSessionlessRevision(version: string | undefined): boolean {
  return version !== undefined && version >= FIRST_SESSIONLESS_REVISION;
}
