import type { DaemonStatus } from '../protocol/frames.js';
import { locateSocketPath } from '../shared/locate.js';
import { helpRow, type OptionRow, optionsHelp } from '../shared/option-table.js';
import { socketRequest } from '../shared/socket-request.js';
import { parseOptions } from './args.js';
import { socketRequestRows } from './common-options.js';
import type { Io } from './io.js';

export const STATUS_OPTIONS = [
  { name: 'json', kind: 'boolean', help: 'print the figures as one JSON object' },
  ...socketRequestRows(),
  helpRow(),
] as const satisfies readonly OptionRow[];

export const STATUS_HELP = `Usage: mcp-progress status [--json] [--socket PATH | --runtime-dir DIR]

Shows the running daemon: pid, version, uptime, socket, gateway URL, worker
connections (status's own not counted), sessions, streams, subscriptions,
counters and the done journal (FAILING while its writes fail: dones are then
refused journal_failed and not applied); with a NATS backplane
(docs/BACKPLANE.md), this daemon's name on it and the other hosts with their
active streams (progress/list names each stream's host). Exit 0 when a daemon answers, 1 when none does or when it
refuses the request (at its connection cap, or stopping), with its reason,
2 when the command line is wrong.

${optionsHelp(STATUS_OPTIONS, 23)}`;

export async function statusCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseOptions('status', argv, STATUS_OPTIONS);
  if (values.help) {
    io.out(STATUS_HELP);
    return 0;
  }
  const socketPath = await locateSocketPath(
    { socket: values.socket, runtimeDir: values['runtime-dir'] },
    io.env,
  );
  const reply = await socketRequest({
    socketPath,
    type: 'status',
    data: {},
    isReply: (envelope) => envelope.type === 'status' || envelope.type === 'rejected',
    timeoutMs: values['timeout-ms'],
  });
  if (reply.type === 'rejected') {
    // At its connection cap, or while stopping, the daemon says why instead of answering.
    const rejection = reply.data as { code?: string; message?: string };
    io.err(`mcp-progress status: rejected (${rejection.code}): ${rejection.message}\n`);
    return 1;
  }
  const status = reply.data as DaemonStatus;
  io.out(values.json ? `${JSON.stringify(status, null, 2)}\n` : formatStatus(status));
  return 0;
}

export function formatStatus(status: DaemonStatus): string {
  const rejected = Object.entries(status.counters.framesRejected);
  const rejectedTotal = rejected.reduce((sum, [, n]) => sum + (n ?? 0), 0);
  const detail =
    rejected.length > 0 ? ` (${rejected.map(([code, n]) => `${code} ${n}`).join(', ')})` : '';
  return [
    `mcp-progress daemon ${status.version}, pid ${status.pid}, up ${duration(status.uptimeMs)}`,
    `socket         ${status.socket}`,
    `gateway        ${status.url}`,
    `workers        ${status.connections} connected`,
    `sessions       ${status.sessions}`,
    `streams        ${status.streams.active} active, ${status.streams.done} done, ${status.streams.waiting} waiting`,
    `subscriptions  ${status.subscriptions}`,
    `claims         ${status.claims}`,
    `tasks          ${status.tasks}`,
    `frames         ${status.counters.framesAccepted} accepted, ${rejectedTotal} rejected${detail}`,
    `notifications  ${status.counters.notificationsSent} sent, ${status.counters.coalesced} coalesced`,
    `refused        ${status.counters.connectionsRefused} connections at the cap, ${status.counters.slowSessionsClosed} slow sessions closed`,
    `memory         ${(status.memory.rss / 1048576).toFixed(1)} MiB resident`,
    journalLine(status.journal),
    ...backplaneLines(status.backplane),
    '',
  ].join('\n');
}

/** The done journal: its size, and while its writes fail, why and what that means for dones. */
function journalLine(journal: DaemonStatus['journal']): string {
  const figures = `${(journal.bytes / 1024).toFixed(1)} KiB, ${journal.dones} dones, ${journal.recovered} replayed at start, ${journal.refusedLines} lines refused at start, ${journal.writeFailures} dones refused journal_failed`;
  if (!journal.failing) return `journal        ${figures}`;
  return `journal        FAILING (${journal.lastError}): dones are refused journal_failed and not applied until a write succeeds; ${figures}`;
}

/** With a NATS backplane: this daemon's name on it, and each other host with its active streams. */
function backplaneLines(backplane: DaemonStatus['backplane']): string[] {
  if (backplane === undefined) return [];
  const connection =
    backplane.refused !== undefined
      ? `NOT JOINED: ${backplane.refused}; give this daemon another --nats-name`
      : backplane.connected
        ? 'connected to NATS'
        : 'not connected to NATS (retrying)';
  const lines = [
    `backplane      ${backplane.name} (instance ${backplane.instance}), ${connection}` +
      (backplane.invalidMessages > 0
        ? `, ${backplane.invalidMessages} invalid messages ignored`
        : ''),
  ];
  for (const host of backplane.hosts) {
    lines.push(
      `  host ${host.name.padEnd(16)} ${host.state === 'up' ? 'up  ' : 'lost'}  ${host.activeStreams} active streams` +
        (host.instance !== undefined ? `  (instance ${host.instance})` : ''),
    );
  }
  return lines;
}

function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}
