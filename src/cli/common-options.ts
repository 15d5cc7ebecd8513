/** Option rows that more than one command takes, written once. */
import { DEFAULT_SOCKET_REQUEST_TIMEOUT_MS } from '../shared/defaults.js';
import type { OptionRow } from '../shared/option-table.js';

/** How a one-shot request (publish, status) finds the daemon's socket, and how long it waits. */
export function socketRequestRows(section?: string) {
  const under = section === undefined ? {} : { section };
  return [
    {
      name: 'socket',
      kind: 'string',
      value: 'PATH',
      ...under,
      help: "daemon socket (default: $MCP_PROGRESS_SOCKET, else the socket named in the runtime dir's daemon.json, else the runtime dir's bridge.sock)",
    },
    {
      name: 'runtime-dir',
      kind: 'string',
      value: 'DIR',
      ...under,
      help: "find the daemon's socket through DIR",
    },
    {
      name: 'timeout-ms',
      kind: 'integer',
      default: DEFAULT_SOCKET_REQUEST_TIMEOUT_MS,
      min: 1,
      ...under,
      help: 'how long to wait for the answer (default {default})',
    },
  ] as const satisfies readonly OptionRow[];
}
