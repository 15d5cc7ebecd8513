/** How /mcp answers a POST itself, before or instead of the MCP SDK: one JSON-RPC error. */
import type { ServerResponse } from 'node:http';
import {
  daemonStoppingError,
  errorReply,
  MCP_ERRORS,
  type McpErrorName,
} from '../protocol/errors.js';
import type { McpSessionRefusal } from './session-host.js';

/**
 * `name`: the error of MCP_ERRORS (its code goes on the wire, its name as `data.code`); `id`: the
 * request's, when the refusal is of one request whose id was read (a task listen).
 */
export function jsonRpcError(
  response: ServerResponse,
  status: number,
  name: McpErrorName,
  message: string,
  id: string | number | null = null,
): void {
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  response.end(JSON.stringify(errorReply(MCP_ERRORS[name].code, name, message, id)));
}

/**
 * HTTP 503 with the JSON-RPC error daemon_stopping and its `data.code` (docs/PROTOCOL.md 4.5):
 * not a refusal for good, the client connects again once a daemon is back.
 */
export function daemonStopping(response: ServerResponse, id: string | number | null = null): void {
  response.writeHead(503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  response.end(JSON.stringify(daemonStoppingError(id)));
}

/** A session the daemon's hub refused, 503 either way: the daemon stopping, or --max-sessions. */
export function sessionRefused(
  response: ServerResponse,
  refusal: McpSessionRefusal,
  id: string | number | null = null,
): void {
  if (refusal.code === 'daemon_stopping') daemonStopping(response, id);
  else jsonRpcError(response, 503, 'refused', refusal.refused, id);
}
