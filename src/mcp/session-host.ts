/**
 * What /mcp asks of the daemon's session hub, for both revisions: a place under --max-sessions
 * for each session (a 2025 MCP session, or a 2026-07-28 request that watches progress or listens
 * for tasks), and the unread-buffer cap on what the session's SSE responses hold.
 */
import type { ProgressSource } from './progress-source.js';

/** What the daemon's session hub sees of one /mcp session. */
export interface McpSessionTransport {
  /** Bytes written on the session's open SSE responses and not yet read by the client. */
  unreadBytes(): number;
  /** Ends the session as a slow consumer: its streams end now and are cut off after `graceMs`. */
  closeSlow(graceMs: number): void;
  /** What the session is, when more than an MCP session: named in the hub's log (a task listen). */
  readonly what?: string;
}

/** A session the hub admitted: its progress source, and how to give its place back. */
export interface McpSessionGrant {
  readonly source: ProgressSource;
  close(): void;
  /**
   * The transport wrote `justWritten` bytes that no delivery of the hub made (a task listen's
   * own writes): the session is closed as a slow consumer, as on a delivery, when what it left
   * unread before them passes --max-session-buffer-bytes.
   */
  closeIfSlow(justWritten: number): void;
}

/** Why the hub admitted no session: the daemon is stopping (for a moment), or --max-sessions. */
export interface McpSessionRefusal {
  readonly refused: string;
  readonly code: 'daemon_stopping' | 'too_many_sessions';
}

/** The daemon's session hub, as /mcp needs it: one place under --max-sessions per MCP session. */
export interface McpSessionHost {
  /** Admits a session, or says why not (the daemon stopping, the session cap). */
  open(transport: McpSessionTransport): McpSessionGrant | McpSessionRefusal;
}
