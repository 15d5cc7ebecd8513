/**
 * A stopping daemon gives its workers a grace to close (docs/PROTOCOL.md 4.5). During it, a new
 * session, on the TCP port or on a connection of the local link already open, is refused at once
 * (HTTP 503, the JSON-RPC error daemon_stopping) instead of opened to be closed a moment later;
 * a session already open still gets the worker's final value, then its close. Our clients take
 * the refusal as connect-again-later.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { GatewayClient } from '../../src/gateway-client/gateway-client.js';
import type { DaemonInfo } from '../../src/shared/locate.js';
import {
  cleanupAll,
  eventually,
  type RunningDaemon,
  startDaemon,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import {
  connectStdio,
  httpBase,
  MCP_POST_HEADERS,
  openRawSession,
  postMcp,
  RAW_INITIALIZE,
} from '../helpers/mcp.js';
import { httpAsk, pageCookie } from '../helpers/page.js';
import { progressFrame, type RawWorker, rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());

interface Answer {
  status: number;
  contentType: string | undefined;
  body: string;
}

const STOPPING = {
  jsonrpc: '2.0',
  id: null,
  error: {
    code: -32000,
    message: expect.stringMatching(/^the daemon is stopping.*connect again/),
    data: { code: 'daemon_stopping' },
  },
};

/** The refusal every new session gets while the daemon stops. */
function expectStoppingRefusal(answer: Answer | 'open', what: string): void {
  expect(answer, what).not.toBe('open');
  const { status, contentType, body } = answer as Answer;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    parsed = body;
  }
  expect({ status, contentType, body: parsed }, what).toMatchObject({
    status: 503,
    contentType: expect.stringMatching(/^application\/json/),
    body: STOPPING,
  });
}

/** A WebSocket upgrade (on `socket` when given): 'open', or the daemon's refusal. */
function upgrade(info: DaemonInfo, socket?: Socket): Promise<Answer | 'open'> {
  return new Promise((resolve) => {
    const ws = new WebSocket(
      socket === undefined ? info.url : 'ws://localhost/ws',
      'mcp-progress.v1',
      {
        headers: { authorization: `Bearer ${info.secret}` },
        ...(socket !== undefined && { createConnection: () => socket }),
      },
    );
    ws.once('open', () => {
      ws.terminate();
      resolve('open');
    });
    ws.once('unexpected-response', (_request, response) => {
      answerOf(response).then(resolve);
    });
    ws.once('error', () => {});
  });
}

/** An /mcp initialize over the local link, on `socket`. */
function initializeOn(info: DaemonInfo, socket: Socket): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        host: 'localhost',
        path: '/mcp',
        method: 'POST',
        createConnection: () => socket,
        // The local link's one name; without an agent Node would say localhost:80.
        headers: { ...MCP_POST_HEADERS, host: 'localhost', authorization: `Bearer ${info.secret}` },
      },
      (response) => {
        answerOf(response).then(resolve, reject);
      },
    );
    request.once('error', reject);
    request.end(JSON.stringify(RAW_INITIALIZE));
  });
}

/** A response read whole: its status, content type and body. */
function answerOf(response: IncomingMessage): Promise<Answer> {
  return new Promise((resolve) => {
    let body = '';
    response.setEncoding('utf8').on('data', (text: string) => {
      body += text;
    });
    response.on('end', () =>
      resolve({
        status: response.statusCode ?? 0,
        contentType: response.headers['content-type'],
        body,
      }),
    );
  });
}

/** A connection to the local link, open before the stop (the stop removes gateway.sock). */
async function localLinkConnection(info: DaemonInfo): Promise<Socket> {
  const socket = connect({ path: info.gatewaySocket ?? '' });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return socket;
}

/**
 * A worker on `token` whose last value the daemon holds (coalescing, --min-interval-ms), and
 * which keeps its connection open when the daemon ends it: the stop waits its grace for it.
 */
async function graceHolder(info: DaemonInfo, token: string): Promise<RawWorker> {
  const worker = await rawWorker(info.socket, { keepsOpen: true });
  for (const value of [1, 2]) {
    worker.send('progress', progressFrame(token, value));
    await worker.reply(
      (reply) => reply.type === 'ack' && (reply.data as { seq: number }).seq === value,
    );
  }
  return worker;
}

/** SIGTERM, then the daemon's word that it is stopping and its end of the worker's connection. */
async function stopUntilGrace(daemon: RunningDaemon, worker: RawWorker): Promise<void> {
  daemon.child.kill('SIGTERM');
  await eventually(
    () => (daemon.stderr().includes('stopping') ? true : undefined),
    10_000,
    "the daemon's stopping line",
  );
  await worker.ended;
}

describe('a stopping daemon', () => {
  it('refuses new sessions during its grace, on the port and the local link; an open one gets the final value', async () => {
    const daemon = await startDaemon(['--min-interval-ms', '60000']);
    const { info } = daemon;
    const open = await connectGateway(info);
    await open.request('progress/subscribe', { progressToken: 'final' });
    const worker = await graceHolder(info, 'final');
    // 1 went out at once; 2 is held by the coalescing until the stop flushes it.
    await open.waitFor(1);
    const closed = new Promise<number>((resolve) => open.ws.once('close', (code) => resolve(code)));
    const mcpUrl = `${httpBase(info)}/mcp`;
    const authorization = `Bearer ${info.secret}`;
    // An /mcp session open before the stop (its SDK loaded), and what new sessions need.
    await openRawSession(mcpUrl, { authorization });
    const cookie = await pageCookie(daemon.runtimeDir);
    const linkForUpgrade = await localLinkConnection(info);
    const linkForInitialize = await localLinkConnection(info);

    await stopUntilGrace(daemon, worker);
    const [tcpUpgrade, linkUpgrade, tcpInitialize, linkInitialize, pageStream, client] =
      await Promise.all([
        upgrade(info),
        upgrade(info, linkForUpgrade),
        postMcp(mcpUrl, RAW_INITIALIZE, { authorization }).then(async (response) => ({
          status: response.status,
          contentType: response.headers.get('content-type') ?? undefined,
          body: await response.text(),
        })),
        initializeOn(info, linkForInitialize),
        httpAsk(`${httpBase(info)}/events`, { headers: { cookie } }).then((answer) => ({
          status: answer.status,
          contentType: answer.headers['content-type'],
          body: answer.body,
        })),
        GatewayClient.connect({ url: info.url, secret: info.secret, reconnect: false }).then(
          async (connected) => {
            await connected.close();
            return 'connected';
          },
          (error: unknown) => error,
        ),
      ]);
    // Every answer came while the worker still held the grace open.
    expect(worker.isClosed()).toBe(false);
    expectStoppingRefusal(tcpUpgrade, 'a WebSocket upgrade on the port');
    expectStoppingRefusal(linkUpgrade, 'a WebSocket upgrade on the local link');
    expectStoppingRefusal(tcpInitialize, 'an /mcp initialize on the port');
    expectStoppingRefusal(linkInitialize, 'an /mcp initialize on the local link');
    expectStoppingRefusal(pageStream, "the page's /events");
    expect(client).toMatchObject({
      code: 'daemon_stopping',
      message: expect.stringContaining('the daemon is stopping'),
    });

    // The session open before the stop gets the held value, then the daemon's close.
    worker.destroy();
    expect(await closed).toBe(1001);
    expect(open.notifications.map((n) => n.params.progress)).toEqual([1, 2]);
    expect(await waitForExit(daemon.child)).toBe(0);
  }, 60_000);

  it('`mcp` waits a stopping daemon out, then starts one of its own for the call', async () => {
    const daemon = await startDaemon();
    const mcp = await connectStdio(['--log-level', 'debug'], {
      MCP_PROGRESS_RUNTIME_DIR: daemon.runtimeDir,
    });
    const worker = await graceHolder(daemon.info, 'held');

    await stopUntilGrace(daemon, worker);
    // It connects at this first call, and is refused: the daemon is stopping.
    const listed = mcp.client.callTool({ name: 'list_progress', arguments: {} });
    const refused = /is stopping: waiting until it is gone|no live daemon in [^\n]*is stopping/;
    await eventually(
      () => (refused.test(mcp.stderr()) ? true : undefined),
      10_000,
      () => `mcp to be refused by the stopping daemon; its stderr: ${mcp.stderr()}`,
    );
    // The end of the grace, while mcp waits.
    worker.destroy();
    const result = await listed;
    expect(result.isError, JSON.stringify(result)).not.toBe(true);
    expect(await waitForExit(daemon.child)).toBe(0);
    // It waited for that daemon to be gone, rather than try to start one beside it meanwhile.
    expect(mcp.stderr()).toContain('is stopping: waiting until it is gone');
    expect(mcp.stderr()).not.toMatch(/no live daemon in [^\n]*is stopping/);
    expect(mcp.stderr()).toContain('no daemon was running: started one in this process');
    await mcp.close();
  }, 60_000);
});
