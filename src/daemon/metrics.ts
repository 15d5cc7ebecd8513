/** The daemon's figures in the Prometheus text exposition format (version 0.0.4). */
import type { DaemonStatus } from '../protocol/frames.js';

interface Metric {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  samples: Array<[labels: string, value: number]>;
}

export function formatPrometheus(status: DaemonStatus): string {
  const { counters } = status;
  const metrics: Metric[] = [
    counter(
      'frames_accepted_total',
      'Frames from workers accepted and routed.',
      counters.framesAccepted,
    ),
    {
      name: 'frames_rejected_total',
      help: 'Frames from workers answered with rejected, by code.',
      type: 'counter',
      samples: Object.entries(counters.framesRejected).map(([code, n]) => [
        `{code="${code}"}`,
        n ?? 0,
      ]),
    },
    counter(
      'notifications_sent_total',
      'Notifications written to gateway sessions.',
      counters.notificationsSent,
    ),
    counter(
      'coalesced_total',
      'Progress values replaced by a newer one before they were sent.',
      counters.coalesced,
    ),
    counter(
      'connections_refused_total',
      'Worker connections refused at the connection cap.',
      counters.connectionsRefused,
    ),
    counter(
      'unread_replies_closed_total',
      'Worker connections closed for leaving more than --max-pending-reply-bytes of replies unread.',
      counters.unreadRepliesClosed,
    ),
    counter(
      'slow_sessions_closed_total',
      'Sessions closed for not reading their notifications.',
      counters.slowSessionsClosed,
    ),
    counter(
      'pending_connections_evicted_total',
      'Unauthenticated gateway connections closed for a newer one of the same user (--max-pending-connections).',
      counters.pendingConnectionsEvicted,
    ),
    counter(
      'handshake_timeouts_total',
      'Gateway connections closed for not authenticating within --handshake-timeout-ms.',
      counters.handshakeTimeouts,
    ),
    counter(
      'keepalive_timeouts_total',
      'WebSocket sessions closed for not answering a ping within --pong-timeout-ms.',
      counters.keepaliveTimeouts,
    ),
    {
      name: 'streams',
      help: 'Streams in the table, by state.',
      type: 'gauge',
      samples: Object.entries(status.streams).map(([state, n]) => [`{state="${state}"}`, n]),
    },
    gauge('subscriptions', 'Subscriptions held by gateway sessions.', status.subscriptions),
    gauge(
      'claims',
      'Tokens claimed by worker connections, one per connection and token.',
      status.claims,
    ),
    gauge(
      'tasks',
      'MCP tasks held: working ones, and terminal ones until their TTL passes.',
      status.tasks,
    ),
    gauge(
      'sessions',
      'Open sessions of every kind: WebSocket, /mcp, in-process, page.',
      status.sessions,
    ),
    gauge(
      'page_sessions',
      'Of the sessions, live page streams (GET /events), one per browser tab.',
      status.pageSessions,
    ),
    gauge(
      'local_link_sessions',
      "Of the sessions, WebSocket sessions on the gateway's Unix socket (the local link).",
      status.localLinkSessions,
    ),
    gauge('connections', 'Open worker connections.', status.connections),
    gauge('resident_memory_bytes', 'Resident set size of the daemon process.', status.memory.rss),
    gauge('uptime_seconds', 'Seconds since the daemon started.', status.uptimeMs / 1000),
    gauge(
      'journal_failing',
      '1 while the last write to dones.jsonl failed: dones are refused with journal_failed.',
      status.journal.failing ? 1 : 0,
    ),
    gauge('journal_bytes', 'The size of the done journal, dones.jsonl.', status.journal.bytes),
    counter(
      'journal_write_failures_total',
      'Dones refused with journal_failed: the journal could not take them.',
      status.journal.writeFailures,
    ),
    counter(
      'journal_refused_lines_total',
      'Lines of dones.jsonl refused at start: invalid, too long or dated in the future.',
      status.journal.refusedLines,
    ),
    counter(
      'journal_recovered_total',
      'Acked dones replayed from dones.jsonl at start.',
      status.journal.recovered,
    ),
  ];
  const lines: string[] = [];
  for (const metric of metrics) {
    const name = `mcp_progress_${metric.name}`;
    lines.push(`# HELP ${name} ${metric.help}`, `# TYPE ${name} ${metric.type}`);
    for (const [labels, value] of metric.samples) lines.push(`${name}${labels} ${value}`);
  }
  return `${lines.join('\n')}\n`;
}

function counter(name: string, help: string, value: number): Metric {
  return { name, help, type: 'counter', samples: [['', value]] };
}

function gauge(name: string, help: string, value: number): Metric {
  return { name, help, type: 'gauge', samples: [['', value]] };
}
