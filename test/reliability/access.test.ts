/**
 * Access control: only the user who runs the daemon reaches it. The other
 * user is real: created for the test when it runs as root.
 */
import { chmodSync, lchownSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAll, type RunningDaemon, runCli, startDaemon, tempDir } from '../helpers/daemon.js';
import { nodeWorker, pythonWorker } from '../helpers/driven-worker.js';
import { connectGateway } from '../helpers/gateway.js';
import { asOtherUser, OTHER_USER, otherUser, TRY_CONNECT } from '../helpers/other-user.js';
import { httpAsk, pageCookie, pageTicketUrl } from '../helpers/page.js';
import { rootOnly } from '../helpers/tools.js';
import { rawWorker } from '../helpers/worker.js';

const TRY_READ = `
import sys
try:
    open(sys.argv[1]).read()
    print("read")
except OSError as e:
    print(type(e).__name__)
`;

/** HTTP requests to 127.0.0.1:argv[1], each [method, path, headers]; prints [[status, body], ...]. */
const TRY_HTTP = `
import http.client, json, sys
answers = []
for method, path, headers in json.loads(sys.argv[2]):
    connection = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
    connection.request(method, path, body="{}" if method == "POST" else None, headers=headers)
    response = connection.getresponse()
    # A refusal's body is short and ends; a page that is served (an event stream) may not end.
    answers.append([response.status, response.read().decode() if response.status != 200 else ""])
    connection.close()
print(json.dumps(answers))
`;

let daemon: RunningDaemon;
beforeAll(async () => {
  daemon = await startDaemon(['--log-level', 'debug']);
});
afterAll(async () => {
  await daemon.stop();
  cleanupAll();
});

describe('file modes', () => {
  it('runtime dir 0700, sockets, daemon.json and daemon.lock 0600, owned by the daemon user', () => {
    expect(statSync(daemon.runtimeDir).mode & 0o777).toBe(0o700);
    expect(statSync(daemon.info.socket).mode & 0o777).toBe(0o600);
    expect(statSync(join(daemon.runtimeDir, 'daemon.json')).mode & 0o777).toBe(0o600);
    expect(statSync(join(daemon.runtimeDir, 'gateway.sock')).mode & 0o777).toBe(0o600);
    // The lock is a listening socket too (PROTOCOL.md 1): the daemon's user alone may connect.
    expect(statSync(join(daemon.runtimeDir, 'daemon.lock')).mode & 0o777).toBe(0o600);
    expect(statSync(daemon.info.socket).uid).toBe(process.getuid?.());
  });
});

describe.skipIf(otherUser.skip)(`another local user (${OTHER_USER})`, () => {
  beforeAll(() => otherUser.require());
  it('cannot connect to the socket or read daemon.json', () => {
    expect(asOtherUser(TRY_CONNECT, daemon.info.socket)).toBe('PermissionError');
    expect(asOtherUser(TRY_READ, join(daemon.runtimeDir, 'daemon.json'))).toBe('PermissionError');
  });

  it('cannot connect even when the runtime dir is opened up: the socket itself is 0600', () => {
    const { mode } = statSync(daemon.runtimeDir);
    chmodSync(daemon.runtimeDir, 0o755);
    try {
      expect(asOtherUser(TRY_CONNECT, daemon.info.socket)).toBe('PermissionError');
      expect(asOtherUser(TRY_READ, join(daemon.runtimeDir, 'daemon.json'))).toBe('PermissionError');
    } finally {
      chmodSync(daemon.runtimeDir, mode & 0o777);
    }
  });

  it("cannot use the page with the owner's cookie or one-time URL: 403 naming both users; the owner can", async () => {
    const url = new URL(daemon.info.url);
    const names = { host: url.host };
    const cookie = await pageCookie(daemon.runtimeDir);
    const ticket = new URL(await pageTicketUrl(daemon.runtimeDir));
    const origin = `http://${url.host}`;
    const json = { 'content-type': 'application/json', origin };
    const requests = [
      ['GET', '/healthz', names],
      ['GET', '/', { ...names, cookie }],
      ['GET', '/page.js', { ...names, cookie }],
      ['GET', '/events', { ...names, cookie }],
      ['POST', '/cancel', { ...names, cookie, ...json }],
      ['GET', `${ticket.pathname}${ticket.search}`, names],
    ];
    const answers = JSON.parse(asOtherUser(TRY_HTTP, url.port, JSON.stringify(requests))) as Array<
      [number, string]
    >;
    // It reaches the port (healthz needs nothing); every page route refuses it.
    expect(answers[0]?.[0]).toBe(200);
    const own = process.getuid?.();
    for (const [status, body] of answers.slice(1)) {
      expect(status).toBe(403);
      expect(body).toMatch(new RegExp(`uid ${own}\\b.*uid \\d+.*mcp-progress open`));
    }
    // The same cookie serves the owner, and the ticket it could not redeem is still good.
    expect(
      (await httpAsk(`http://${url.host}/page.js`, { headers: { ...names, cookie } })).status,
    ).toBe(200);
    const redeemed = await httpAsk(ticket.href, { headers: names });
    expect(redeemed.status).toBe(303);
  });

  it('the check itself works: the other user can reach a socket that allows it', () => {
    const { mode } = statSync(daemon.runtimeDir);
    chmodSync(daemon.runtimeDir, 0o755);
    chmodSync(daemon.info.socket, 0o666);
    try {
      expect(asOtherUser(TRY_CONNECT, daemon.info.socket)).toBe('connected');
    } finally {
      chmodSync(daemon.info.socket, 0o600);
      chmodSync(daemon.runtimeDir, mode & 0o777);
    }
  });
});

describe('HTTP surface', () => {
  const base = () => daemon.info.url.replace(/^ws/, 'http').replace(/\/ws$/, '');

  it('GET /healthz answers without the secret', async () => {
    const response = await fetch(`${base()}/healthz`);
    expect(response.status).toBe(200);
    // A browser must not sniff it into something else.
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await response.json()).toMatchObject({ ok: true, pid: daemon.child.pid });
  });

  it('GET /metrics needs the secret, and shows the figures in Prometheus text format', async () => {
    expect((await fetch(`${base()}/metrics`)).status).toBe(401);
    expect(
      (await fetch(`${base()}/metrics`, { headers: { authorization: 'Bearer nope-nope-nope' } }))
        .status,
    ).toBe(401);
    const foreign = await fetch(`${base()}/metrics`, {
      headers: { authorization: `Bearer ${daemon.info.secret}`, origin: 'https://evil.example' },
    });
    expect(foreign.status).toBe(403);
    // A framing error is counted by its code like any other refusal.
    const garbage = await rawWorker(daemon.info.socket);
    garbage.write('not json\f');
    await garbage.closed;
    const response = await fetch(`${base()}/metrics`, {
      headers: { authorization: `Bearer ${daemon.info.secret}` },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain; version=0.0.4');
    const text = await response.text();
    // Samples, not just names: `name{labels} value` on a line of its own.
    for (const name of [
      'mcp_progress_frames_accepted_total',
      'mcp_progress_notifications_sent_total',
      'mcp_progress_coalesced_total',
      'mcp_progress_connections_refused_total',
      'mcp_progress_streams{state="active"}',
      'mcp_progress_subscriptions',
      'mcp_progress_claims',
      'mcp_progress_tasks',
      'mcp_progress_sessions',
      'mcp_progress_connections',
    ]) {
      expect(text).toMatch(new RegExp(`^${name.replace(/[{}]/g, '\\$&')} \\d+$`, 'm'));
    }
    expect(text).toMatch(/^mcp_progress_frames_rejected_total\{code="invalid_json"\} 1$/m);
    expect(text).toMatch(/^# TYPE mcp_progress_frames_accepted_total counter$/m);
  });

  it('takes the auth scheme in any case, as HTTP says', async () => {
    const response = await fetch(`${base()}/metrics`, {
      headers: { authorization: `bearer ${daemon.info.secret}` },
    });
    expect(response.status).toBe(200);
  });

  it('no log line contains the secret, even at debug level', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'x' });
    await gateway.close();
    await fetch(`${base()}/metrics?access_token=${daemon.info.secret}`);
    expect(daemon.stderr()).toContain('session');
    expect(daemon.stderr()).not.toContain(daemon.info.secret);
  });
});

const chownToStranger = rootOnly('lchown to another uid', 'a runtime dir planted by another user');

/**
 * In a shared /tmp another user can create <tmpdir>/mcp-progress-<uid> before the daemon does, with
 * a socket and a daemon.json of their own. Clients must not talk to those (chown needs root).
 */
describe.skipIf(chownToStranger.skip)('a runtime dir planted by another user', () => {
  const STRANGER = 54_321;
  let planted: string;
  let accepted = 0;
  let impostor: Server;
  beforeAll(async () => {
    chownToStranger.require();
    planted = tempDir();
    impostor = createServer(() => accepted++);
    const socket = join(planted, 'bridge.sock');
    await new Promise<void>((resolve) => impostor.listen(socket, resolve));
    chmodSync(socket, 0o666);
    lchownSync(socket, STRANGER, STRANGER);
    writeFileSync(join(planted, 'daemon.json'), JSON.stringify({ ...daemon.info, pid: 1 }));
    lchownSync(join(planted, 'daemon.json'), STRANGER, STRANGER);
  });
  // Not opened when beforeAll failed (not root under CI).
  afterAll(
    () =>
      new Promise<void>((resolve) =>
        impostor === undefined ? resolve() : impostor.close(() => resolve()),
      ),
  );

  const env = () => ({
    MCP_PROGRESS_SOCKET: join(planted, 'bridge.sock'),
    MCP_PROGRESS_TOKEN: 'lured',
  });

  it('the Node and Python clients refuse its socket and say why', async () => {
    for (const worker of [nodeWorker(env()), pythonWorker(env())]) {
      const refusal = await worker.next(
        (e) => e.event === 'error' && String(e.message).includes(`belongs to uid ${STRANGER}`),
        'the foreign_owner warning',
      );
      expect(String(refusal.message)).toContain('MCP_PROGRESS_RUNTIME_DIR');
      worker.send({ update: { progress: 1 } });
      worker.send({ done: 'ok' });
      expect(await worker.next((e) => e.event === 'done', 'done')).toMatchObject({
        delivered: false,
      });
      worker.send({ exit: 0 });
      await worker.exit();
    }
    expect(accepted).toBe(0);
  });

  it('tail refuses its daemon.json', async () => {
    const result = await runCli(['tail', '--runtime-dir', planted, '--json']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`belongs to uid ${STRANGER}`);
  });
});
