/**
 * The Python and C clients cannot import src/shared/defaults.ts: they hold copies of its client
 * defaults (reconnect waits, the done's grace and retry, the coalescing interval, the done timeout)
 * and of the wire's limits. Each copy is held to the constant here: the Python client's read from
 * the real interpreter, the C header's from its #defines.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_DONE_STATUS,
  MAX_FRAME_BYTES,
  MAX_MESSAGE_BYTES,
  PROTOCOL_VERSION,
} from '../../src/protocol/limits.js';
import {
  DEFAULT_DONE_TIMEOUT_MS,
  DEFAULT_MIN_INTERVAL_MS,
  JOURNAL_RETRY_MS,
  NEVER_CONNECTED_GRACE_MS,
  RECONNECT_BACKOFF,
} from '../../src/shared/defaults.js';
import { ROOT } from '../helpers/daemon.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';

describe('client defaults', () => {
  it('are the Python client’s, in seconds where it counts seconds', () => {
    const script = `
import inspect, json, sys
sys.path.insert(0, sys.argv[1])
import mcp_progress as m
init = inspect.signature(m.Progress.__init__).parameters
done = inspect.signature(m.Progress.done).parameters
print(json.dumps({
  "backoffFirstMs": m.BACKOFF_FIRST_SECONDS * 1000,
  "backoffMaxMs": m.BACKOFF_MAX_SECONDS * 1000,
  "neverConnectedGraceMs": m.NEVER_CONNECTED_GRACE_SECONDS * 1000,
  "journalRetryMs": m.JOURNAL_RETRY_SECONDS * 1000,
  "intervalMs": init["interval"].default * 1000,
  "doneTimeoutMs": init["done_timeout"].default * 1000,
  "doneStatus": done["status"].default,
  "maxMessageBytes": m.MAX_MESSAGE_BYTES,
  "protocolVersion": m.PROTOCOL_VERSION,
}))`;
    // -B: no __pycache__ left beside the client.
    const printed = execFileSync(
      PYTHON,
      [...PYTHON_ARGS, '-B', '-c', script, join(ROOT, 'clients/python')],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(printed)).toEqual({
      backoffFirstMs: RECONNECT_BACKOFF.firstMs,
      backoffMaxMs: RECONNECT_BACKOFF.maxMs,
      neverConnectedGraceMs: NEVER_CONNECTED_GRACE_MS,
      journalRetryMs: JOURNAL_RETRY_MS,
      intervalMs: DEFAULT_MIN_INTERVAL_MS,
      doneTimeoutMs: DEFAULT_DONE_TIMEOUT_MS,
      doneStatus: DEFAULT_DONE_STATUS,
      maxMessageBytes: MAX_MESSAGE_BYTES,
      protocolVersion: PROTOCOL_VERSION,
    });
  });

  it('are the C client’s (its header’s #defines)', () => {
    const header = readFileSync(join(ROOT, 'clients/c/mcp_progress.h'), 'utf8');
    const defined = (name: string) =>
      Number(new RegExp(`^#define ${name} (\\d+)$`, 'm').exec(header)?.[1]);
    expect({
      backoffFirstMs: defined('MCPP_BACKOFF_FIRST_MS'),
      backoffMaxMs: defined('MCPP_BACKOFF_MAX_MS'),
      neverConnectedGraceMs: defined('MCPP_NEVER_CONNECTED_GRACE_MS'),
      journalRetryMs: defined('MCPP_JOURNAL_RETRY_MS'),
      maxFrameBytes: defined('MCP_PROGRESS_MAX_FRAME'),
      maxMessageBytes: defined('MCP_PROGRESS_MAX_MESSAGE'),
    }).toEqual({
      backoffFirstMs: RECONNECT_BACKOFF.firstMs,
      backoffMaxMs: RECONNECT_BACKOFF.maxMs,
      neverConnectedGraceMs: NEVER_CONNECTED_GRACE_MS,
      journalRetryMs: JOURNAL_RETRY_MS,
      maxFrameBytes: MAX_FRAME_BYTES,
      maxMessageBytes: MAX_MESSAGE_BYTES,
    });
  });
});
