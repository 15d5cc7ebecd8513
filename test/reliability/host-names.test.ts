/**
 * DNS rebinding: a page on another site whose name was rebound to 127.0.0.1 reaches the
 * gateway port with its own name in `Host`. Every route and the WebSocket upgrade accept only
 * the daemon's own names; its own origin (the page at `/`) is accepted where Origin is checked.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAll, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { initializeText, MCP_POST_HEADERS } from '../helpers/mcp.js';

let daemon: RunningDaemon;
let port: number;
beforeAll(async () => {
  daemon = await startDaemon();
  port = Number(new URL(daemon.info.url).port);
});
afterAll(async () => {
  await daemon.stop();
  cleanupAll();
});

interface Answer {
  readonly status: number;
  readonly body: string;
}

/** One request to the daemon's port with exactly these headers (Host included). */
function ask(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = request({ host: '127.0.0.1', port, method, path, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        text += chunk;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
    });
    // An upgrade refused before the handshake is an ordinary response; one accepted is not.
    outgoing.on('upgrade', (response, socket) => {
      socket.destroy();
      resolve({ status: response.statusCode ?? 0, body: '' });
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

const MCP_INITIALIZE = initializeText('host-names-test');

function mcpHeaders(host: string, origin?: string): Record<string, string> {
  const headers: Record<string, string> = {
    host,
    authorization: `Bearer ${daemon.info.secret}`,
    ...MCP_POST_HEADERS,
  };
  if (origin !== undefined) headers.origin = origin;
  return headers;
}

describe('the Host header on the gateway port', () => {
  it('refuses a foreign name with 421 on every route, before the secret is looked at', async () => {
    const secret = { authorization: `Bearer ${daemon.info.secret}` };
    for (const host of [`evil.example:${port}`, 'evil.example', `127.0.0.1:${port + 1}`]) {
      for (const path of ['/', '/healthz', '/metrics', '/mcp', '/ws', '/events', '/nowhere']) {
        const answer = await ask('GET', path, { host, ...secret });
        expect(answer.status, `${host} ${path}`).toBe(421);
        expect(answer.body).toContain(`Host \`${host}\` is not one of this daemon's names`);
        expect(JSON.parse(answer.body).error.data.code).toBe('misdirected');
        expect(answer.body).toContain(`127.0.0.1:${port}`);
      }
      const posted = await ask('POST', '/mcp', mcpHeaders(host), MCP_INITIALIZE);
      expect(posted.status).toBe(421);
      const upgrade = await ask('GET', '/ws', {
        host,
        ...secret,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'sec-websocket-protocol': 'mcp-progress.v1',
      });
      expect(upgrade.status, `upgrade with Host ${host}`).toBe(421);
      expect(JSON.parse(upgrade.body).error.data.code).toBe('misdirected');
    }
  });

  it('accepts the daemon own names: 127.0.0.1 and localhost with its port', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`]) {
      expect((await ask('GET', '/healthz', { host })).status, host).toBe(200);
    }
    const upgrade = await ask('GET', '/ws', {
      host: `localhost:${port}`,
      authorization: `Bearer ${daemon.info.secret}`,
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      'sec-websocket-protocol': 'mcp-progress.v1',
    });
    expect(upgrade.status).toBe(101);
  });
});

describe('the Origin header on /mcp', () => {
  it("accepts the daemon's own origin, 127.0.0.1 or localhost of its port", async () => {
    for (const [host, origin] of [
      [`127.0.0.1:${port}`, `http://127.0.0.1:${port}`],
      [`localhost:${port}`, `http://localhost:${port}`],
      [`127.0.0.1:${port}`, `http://localhost:${port}`],
    ] as const) {
      const answer = await ask('POST', '/mcp', mcpHeaders(host, origin), MCP_INITIALIZE);
      expect(answer.status, origin).toBe(200);
      expect(answer.body).toContain('"protocolVersion"');
    }
  });

  it('refuses every other origin, another port of localhost included', async () => {
    for (const origin of [
      `http://127.0.0.1:${port + 1}`,
      `http://localhost:${port + 1}`,
      `https://127.0.0.1:${port}`,
      'http://evil.example',
      'null',
    ]) {
      const answer = await ask(
        'POST',
        '/mcp',
        mcpHeaders(`127.0.0.1:${port}`, origin),
        MCP_INITIALIZE,
      );
      expect(answer.status, origin).toBe(403);
      expect(answer.body).toContain(`Origin ${origin} is not allowed`);
      expect(JSON.parse(answer.body).error.data.code).toBe('origin_not_allowed');
    }
  });
});
