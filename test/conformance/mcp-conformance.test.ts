/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, pinned) against the
 * daemon's /mcp: a real daemon, the suite's own client as a child process. Scenarios that need
 * the suite's test tools are in mcp-conformance-baseline.yml with the reason; everything else
 * must pass, dns-rebinding-protection (Host and Origin, 4.1 of docs/PROTOCOL.md) included.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupAll,
  collectOutput,
  ROOT,
  type RunningDaemon,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { initializeText, MCP_POST_HEADERS, resumeSse } from '../helpers/mcp.js';
import { httpAsk } from '../helpers/page.js';

const SUITE = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const BASELINE = join(import.meta.dirname, 'mcp-conformance-baseline.yml');

let daemon: RunningDaemon;
let mcpUrl: string;
beforeAll(async () => {
  daemon = await startDaemon();
  // The suite's client cannot set headers: the secret goes in the query (4.1).
  const url = new URL(daemon.info.url.replace(/^ws/, 'http'));
  url.pathname = '/mcp';
  url.searchParams.set('access_token', daemon.info.secret);
  mcpUrl = url.href;
});
afterAll(async () => {
  await daemon.stop();
  cleanupAll();
});

interface Check {
  readonly id: string;
  readonly status: string;
  readonly errorMessage?: string;
}

/** Runs the suite (with Node 22, which it needs); returns its exit code, output and checks. */
async function runSuite(
  args: string[],
): Promise<{ code: number | null; output: string; checks: Map<string, Check[]> }> {
  const outputDir = tempDir();
  const child = spawn(
    process.execPath,
    [SUITE, 'server', '--url', mcpUrl, '-o', outputDir, ...args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const output = collectOutput(child);
  const code = await waitForExit(child);
  const checks = new Map<string, Check[]>();
  for (const dir of readdirSync(outputDir)) {
    const scenario = dir.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, '');
    checks.set(scenario, JSON.parse(readFileSync(join(outputDir, dir, 'checks.json'), 'utf8')));
  }
  return { code, output: `${output.stdout()}${output.stderr()}`, checks };
}

describe('@modelcontextprotocol/conformance against /mcp', () => {
  it('passes every applicable server scenario; the rest are the baseline', async () => {
    const run = await runSuite(['--expected-failures', BASELINE]);
    expect(run.code, run.output.slice(-3000)).toBe(0);
    for (const scenario of [
      'server-initialize',
      'ping',
      'tools-list',
      'server-sse-multiple-streams',
      'dns-rebinding-protection',
    ]) {
      const checks = run.checks.get(scenario);
      expect(checks, scenario).toBeDefined();
      expect(
        checks?.filter((check) => check.status === 'FAILURE'),
        scenario,
      ).toEqual([]);
    }
    expect(run.checks.get('dns-rebinding-protection')?.map((check) => check.status)).toEqual([
      'SUCCESS',
      'SUCCESS',
    ]);
  }, 240_000);

  it('opens each POST stream with a priming event: an id, retry and no data (SEP-1699)', async () => {
    const initialize = (protocolVersion: string) =>
      httpAsk(mcpUrl, {
        method: 'POST',
        headers: {
          host: new URL(mcpUrl).host,
          ...MCP_POST_HEADERS,
        },
        body: initializeText('priming', protocolVersion),
      });
    const current = await initialize('2025-11-25');
    expect(current.status).toBe(200);
    expect(current.body).toMatch(/^id: \S+\nretry: 1000\ndata: \n\n/);
    // The result follows with an id of its own, after the priming event's.
    expect(current.body).toMatch(
      /\n\nevent: message\nid: \S+\ndata: \{"result":\{"protocolVersion":"2025-11-25"/,
    );
    // Clients of earlier revisions cannot read an event without data: none for them.
    const older = await initialize('2025-06-18');
    expect(older.body).toMatch(/^event: message\nid: \S+\ndata: /);
  });

  it('replays what followed an event to a client that reconnects with Last-Event-ID', async () => {
    const headers = {
      host: new URL(mcpUrl).host,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    };
    const post = (body: object, session?: string) =>
      httpAsk(mcpUrl, {
        method: 'POST',
        headers: session === undefined ? headers : { ...headers, 'mcp-session-id': session },
        body: JSON.stringify({ jsonrpc: '2.0', ...body }),
      });
    const opened = await post({
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'replay', version: '1' },
      },
    });
    const session = String(opened.headers['mcp-session-id']);
    await post({ method: 'notifications/initialized' }, session);
    const listed = await post({ id: 2, method: 'tools/list' }, session);
    const priming = /^id: (\S+)\n/.exec(listed.body)?.[1];
    const result = /id: (\S+)\ndata: (\{"result":\{"tools".*)\n/.exec(listed.body);
    expect(priming).toBeDefined();
    expect(result).not.toBeNull();
    // The stream "dropped" after its priming event: the client asks again from there.
    const replayed = await resumeSse(
      mcpUrl,
      { ...headers, 'mcp-session-id': session },
      priming ?? '',
      '"tools"',
    );
    expect(replayed).toContain(`id: ${result?.[1]}\ndata: ${result?.[2]}`);
  });
});
