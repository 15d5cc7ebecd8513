/** docs/PROTOCOL.md is the contract: it must name every code, method and limit the code uses. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PORT, DEFAULTS } from '../../src/daemon/options.js';
import { DEFAULT_ROUTER_OPTIONS } from '../../src/daemon/router.js';
import { type GatewayBackend, handleRpcText, RPC_METHODS } from '../../src/daemon/rpc.js';
import { TaskTable } from '../../src/daemon/task-table.js';
import type { StreamSummary } from '../../src/protocol/index.js';
import {
  CLOSE_CODES,
  FRAME_TIMEOUT_MS,
  HTTP_REFUSALS,
  MAX_FRAME_BYTES,
  MAX_LIST_REPLY_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_META_DEPTH,
  MAX_NOTIFICATION_BYTES,
  MAX_REASON_BYTES,
  MAX_SAFE_NUMBER,
  MAX_TOKEN_BYTES,
  MAX_TYPE_BYTES,
  MAX_WS_MESSAGE_BYTES,
  MCP_ERRORS,
  MIN_SESSION_BUFFER_BYTES,
  PUBLISHED_SCHEMAS,
  REJECT_CODES,
  RESERVED_EVENTS,
  RPC_ERRORS,
  WORKER_EVENTS,
  WS_SUBPROTOCOL,
} from '../../src/protocol/index.js';
import {
  DEFAULT_TASK_TTL_MS,
  MAX_FOLLOWED_TASKS,
  MAX_LISTENED_TASKS,
  MAX_LIVE_TASKS,
  MAX_STDIO_TASK_LISTENS,
  MAX_TASK_TTL_MS,
  TASK_EXPIRY_CHECK_MS,
  TASK_POLL_INTERVAL_MS,
} from '../../src/shared/defaults.js';

const protocol = readFileSync(resolve(import.meta.dirname, '../../docs/PROTOCOL.md'), 'utf8');

describe('docs/PROTOCOL.md', () => {
  it('lists every rejection code', () => {
    for (const code of Object.keys(REJECT_CODES)) expect(protocol).toContain(`\`${code}\``);
  });

  it('lists every JSON-RPC error and method', () => {
    for (const [name, { code }] of Object.entries(RPC_ERRORS))
      expect(protocol).toContain(`| ${code} | \`${name}\``);
    for (const method of RPC_METHODS) expect(protocol).toContain(`\`${method}\``);
  });

  it('lists every JSON-RPC error /mcp answers itself, in 4.6', () => {
    const section = protocol.slice(
      protocol.indexOf('### 4.6 MCP over Streamable HTTP'),
      protocol.indexOf('### 4.7'),
    );
    for (const [name, { code }] of Object.entries(MCP_ERRORS))
      expect(section).toMatch(new RegExp(`\\| ${code} \\| \`${name}\`\\s+\\|`));
    expect(section).toContain(`at most **${MAX_STDIO_TASK_LISTENS}** task listens`);
    expect(section).toContain(`(up to ${MAX_LISTENED_TASKS} \`taskIds\`)`);
    expect(section).toContain(`at most **${MAX_FOLLOWED_TASKS}** working tasks`);
  });

  it('lists every refusal of the gateway port with its status, in 4.9', () => {
    const section = protocol.slice(
      protocol.indexOf('### 4.9 Refusals on the gateway port'),
      protocol.indexOf('## 5.'),
    );
    const rows = [...section.matchAll(/^\| (\d{3}) +\| `(\w+)` +\|/gm)].map((m) => [
      m[2],
      Number(m[1]),
    ]);
    expect(rows).toEqual(
      expect.arrayContaining(
        Object.entries(HTTP_REFUSALS).map(([name, { status }]) => [name, status]),
      ),
    );
    expect(rows).toHaveLength(Object.keys(HTTP_REFUSALS).length);
  });

  it('lists every worker event and close code', () => {
    for (const event of Object.keys(WORKER_EVENTS)) expect(protocol).toContain(`**\`${event}\`**`);
    for (const { code } of Object.values(CLOSE_CODES)) expect(protocol).toContain(`| ${code} |`);
  });

  it('quotes the limits the code enforces', () => {
    expect(protocol).toContain(`**${MAX_FRAME_BYTES} bytes** (64 KiB)`);
    expect(protocol).toContain(`are at most ${2 * MAX_FRAME_BYTES} (twice the limit)`);
    expect(protocol).toContain(`**${MAX_WS_MESSAGE_BYTES} bytes**`);
    expect(protocol).toContain(`at most **${MAX_TOKEN_BYTES} UTF-8 bytes**`);
    expect(protocol).toContain(`at most **${MAX_MESSAGE_BYTES} UTF-8 bytes**`);
    expect(protocol).toContain(`**${FRAME_TIMEOUT_MS / 1000} s**`);
    expect(protocol).toContain(`(default **${DEFAULT_ROUTER_OPTIONS.retentionMs / 1000} s**`);
    expect(protocol).toContain(`(default **${DEFAULT_ROUTER_OPTIONS.abandonGraceMs / 1000} s**`);
    expect(protocol).toContain(`(default **${DEFAULT_ROUTER_OPTIONS.defaultMinIntervalMs}**`);
    expect(protocol).toContain(`ws://127.0.0.1:${DEFAULT_PORT}/ws`);
    expect(protocol).toContain(`(**${DEFAULTS.shutdownGraceMs} ms**, \`shutdownGraceMs\``);
    expect(protocol).toContain(WS_SUBPROTOCOL);
    expect(protocol).toContain(`most **${MAX_TYPE_BYTES} UTF-8 bytes**`);
    expect(protocol).toContain(`\`reason\` (${MAX_REASON_BYTES})`);
    expect(protocol).toContain(
      `nest at most ${MAX_META_DEPTH} levels deep, \`_meta\` itself being`,
    );
    expect(protocol).toContain(`minimum, **${MIN_SESSION_BUFFER_BYTES} bytes**`);
    expect(protocol).toContain(`(**${MAX_NOTIFICATION_BYTES} bytes**:`);
    expect(MAX_SAFE_NUMBER).toBe(2 ** 53 - 1);
    expect(protocol).toContain(`(±${MAX_SAFE_NUMBER};`);
  });

  it('gives a gateway the read limit the largest daemon messages need, in 4.1 and 9', () => {
    const connecting = protocol.slice(
      protocol.indexOf('### 4.1 Connecting'),
      protocol.indexOf('#### The local link'),
    );
    const checklist = protocol.slice(protocol.indexOf('## 9. '), protocol.indexOf('## 10. '));
    expect(MAX_NOTIFICATION_BYTES).toBeLessThan(MAX_LIST_REPLY_BYTES);
    for (const section of [connecting, checklist]) {
      expect(section).toContain(`${MAX_WS_MESSAGE_BYTES} bytes`);
      expect(section).toContain(`notification is at most ${MAX_NOTIFICATION_BYTES} bytes`);
      expect(section).toMatch(new RegExp(`${MAX_LIST_REPLY_BYTES}\\*{0,2} bytes`));
    }
  });

  it('echoes a numeric JSON-RPC id as 4.4 says', () => {
    const echoed = (id: string) =>
      handleRpcText(
        1,
        `{"jsonrpc":"2.0","id":${id},"method":"nope"}`,
        {} as GatewayBackend,
        () => {},
      )?.match(/^\{"jsonrpc":"2\.0","id":([^,]*),/)?.[1];
    const section = protocol.slice(protocol.indexOf('### 4.4 Errors'), protocol.indexOf('### 4.5'));
    const examples = [...section.matchAll(/`([-0-9.eE]+)` as `([-0-9.eE]+)`/g)];
    expect(examples.length).toBeGreaterThan(5);
    for (const [, sent, back] of examples) expect(echoed(sent as string), sent).toBe(back);
    const digits = '123456789012345678901234567890';
    expect(echoed(digits)).toBe(digits);
  });

  it('orders the gateway HTTP refusals the same in 4.1 and 6', () => {
    const statuses = (text: string) => [...text.matchAll(/\b(4\d\d|503)\b/g)].map((m) => m[1]);
    const order = protocol.slice(
      protocol.indexOf('- Order of the checks:'),
      protocol.indexOf('- Origin: a request'),
    );
    const row = protocol.match(/^\| gateway \| HTTP [^|]*\|/m)?.[0] ?? '';
    expect(statuses(order)).toEqual(['421', '404', '426', '403', '401', '400', '503']);
    expect(statuses(row)).toEqual(statuses(order));
  });

  it('gives the task reasons and TTL bounds the task table makes, in 4.2.3', () => {
    const section = protocol.slice(
      protocol.indexOf('#### 4.2.3 Tasks'),
      protocol.indexOf('### 4.3'),
    );
    const tasks = new TaskTable(
      {
        defaultTtlMs: DEFAULT_TASK_TTL_MS,
        maxTtlMs: MAX_TASK_TTL_MS,
        maxTasks: MAX_LIVE_TASKS,
        pollIntervalMs: TASK_POLL_INTERVAL_MS,
        expiryCheckMs: TASK_EXPIRY_CHECK_MS,
      },
      () => 'id',
    );
    const ended = (status: StreamSummary['status']): StreamSummary => ({
      progressToken: 't',
      state: 'done',
      status,
      subscribers: 0,
      startedAt: 0,
      updatedAt: 0,
    });
    for (const status of ['error', 'abandoned'] as const) {
      const reason = tasks.create('t', undefined, () => ended(status), 0).task?.reason;
      expect(section).toContain(`\`${reason}\` for \`${status}\``);
    }
    const working = tasks.create('u', MAX_TASK_TTL_MS + 1, () => undefined, 0).task;
    expect(working?.ttlMs).toBe(MAX_TASK_TTL_MS);
    const cancelled = tasks.cancel(working?.taskId ?? '', undefined, () => undefined, 0);
    expect(section).toContain(`\`${cancelled?.task.reason}\``);
    expect(section).toContain(`default **${DEFAULT_TASK_TTL_MS}** (10 min), at most`);
    expect(section).toContain(`**${MAX_TASK_TTL_MS}** (24 h): a larger one is not refused`);
  });

  it('names every published schema and every reserved event', () => {
    for (const name of Object.keys(PUBLISHED_SCHEMAS)) expect(protocol).toContain(`\`${name}\``);
    // The schema index (its first column) names each once, a reminder "(and ...)" aside.
    const index = protocol
      .slice(0, protocol.indexOf('Rules beyond JSON Schema'))
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map((line) => line.split('|')[1]?.replace(/\(and [^)]*\)/g, ''))
      .join(' ');
    for (const name of Object.keys(PUBLISHED_SCHEMAS))
      expect(index.split(`\`${name}\``).length - 1, name).toBe(1);
    for (const event of RESERVED_EVENTS) expect(protocol).toContain(`\`${event}\``);
  });

  it('has one separator row per table (another would render as a row of dashes)', () => {
    const separator = /^\|(?: *-+ *\|)+$/;
    const lines = protocol.split('\n');
    for (let i = 1; i < lines.length; i++)
      if (separator.test(lines[i] as string))
        expect(separator.test(lines[i - 1] as string), `line ${i + 1}`).toBe(false);
  });

  it('refers only to sections that exist', () => {
    const headings = new Set(
      [...protocol.matchAll(/^#{2,4} (\d+(?:\.\d+)*)\.? /gm)].map((m) => m[1]),
    );
    const references = [
      ...protocol.matchAll(/\b(?:[Ss]ection|see|in) (\d+(?:\.\d+)*)\b/g),
      ...protocol.matchAll(/\((\d+\.\d+(?:\.\d+)?)\)/g),
    ].map((m) => m[1]);
    expect(references.length).toBeGreaterThan(10);
    for (const reference of references) expect(headings, reference).toContain(reference);
  });
});
