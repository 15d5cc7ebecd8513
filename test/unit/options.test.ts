import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DAEMON_FLAGS,
  DAEMON_OPTIONS,
  DEFAULT_PORT,
  optionsInput,
  resolveDaemonOptions,
} from '../../src/daemon/options.js';
import { MIN_NATS_HEARTBEAT_MS } from '../../src/shared/defaults.js';
import {
  defaultSocketPath,
  locateSocketPath,
  resolveRuntimeDir,
  resolveSocketPath,
} from '../../src/shared/locate.js';
import { optionsHelp } from '../../src/shared/option-table.js';

describe('runtime dir and socket rules', () => {
  it('prefers the flag, then MCP_PROGRESS_RUNTIME_DIR, then XDG_RUNTIME_DIR/mcp-progress, then tmpdir', () => {
    expect(
      resolveRuntimeDir('/flag', { MCP_PROGRESS_RUNTIME_DIR: '/env', XDG_RUNTIME_DIR: '/xdg' }),
    ).toBe('/flag');
    expect(
      resolveRuntimeDir(undefined, { MCP_PROGRESS_RUNTIME_DIR: '/env', XDG_RUNTIME_DIR: '/xdg' }),
    ).toBe('/env');
    expect(resolveRuntimeDir(undefined, { XDG_RUNTIME_DIR: '/xdg' })).toBe('/xdg/mcp-progress');
    expect(resolveRuntimeDir(undefined, {})).toMatch(/mcp-progress-\d+$/);
  });

  it('puts the socket in the runtime dir, or names a pipe on Windows', () => {
    expect(defaultSocketPath('/run/x', 'linux')).toBe(join('/run/x', 'bridge.sock'));
    expect(defaultSocketPath('/run/x', 'win32')).toMatch(/^\\\\\.\\pipe\\mcp-progress-/);
  });

  it('a client uses --socket, then MCP_PROGRESS_SOCKET, then the default', () => {
    const env = { MCP_PROGRESS_SOCKET: '/env.sock', XDG_RUNTIME_DIR: '/xdg' };
    expect(resolveSocketPath({ socket: '/flag.sock' }, env)).toBe('/flag.sock');
    expect(resolveSocketPath({}, env)).toBe('/env.sock');
    expect(resolveSocketPath({ runtimeDir: '/rd' }, env)).toBe(join('/rd', 'bridge.sock'));
    expect(resolveSocketPath({}, { XDG_RUNTIME_DIR: '/xdg' })).toBe(
      '/xdg/mcp-progress/bridge.sock',
    );
  });
});

describe('locating the socket for publish and status', () => {
  it("uses --socket, then MCP_PROGRESS_SOCKET, then the runtime dir's daemon.json, then the default", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-progress-locate-'));
    try {
      const env = { MCP_PROGRESS_SOCKET: '/env.sock' };
      // No daemon.json yet: the default socket of the runtime dir.
      expect(await locateSocketPath({ runtimeDir: dir }, env)).toBe(join(dir, 'bridge.sock'));
      writeFileSync(
        join(dir, 'daemon.json'),
        JSON.stringify({
          pid: 1,
          version: '0',
          socket: '/elsewhere.sock',
          url: 'ws://x',
          secret: 's',
        }),
      );
      expect(await locateSocketPath({ socket: '/flag.sock', runtimeDir: dir }, env)).toBe(
        '/flag.sock',
      );
      expect(await locateSocketPath({}, { ...env, MCP_PROGRESS_RUNTIME_DIR: dir })).toBe(
        '/env.sock',
      );
      expect(await locateSocketPath({ runtimeDir: dir }, env)).toBe('/elsewhere.sock');
      expect(await locateSocketPath({}, { MCP_PROGRESS_RUNTIME_DIR: dir })).toBe('/elsewhere.sock');
      // A daemon.json that is not one: the default again.
      writeFileSync(join(dir, 'daemon.json'), 'not json');
      expect(await locateSocketPath({ runtimeDir: dir }, {})).toBe(join(dir, 'bridge.sock'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('daemon options', () => {
  it('fills the documented defaults', () => {
    const options = resolveDaemonOptions({ runtimeDir: '/r' }, {});
    expect(options).toMatchObject({
      socketPath: '/r/bridge.sock',
      host: '127.0.0.1',
      port: DEFAULT_PORT,
      maxFrameBytes: 65_536,
      router: {
        retentionMs: 60_000,
        streamTtlMs: 3_600_000,
        defaultMinIntervalMs: 100,
        abandonGraceMs: 30_000,
      },
    });
  });

  it.each([
    [{ port: -1 }, 'option --port: expected an integer from 0 to 65535, got -1'],
    [{ port: 1.5 }, 'option --port'],
    [{ maxConnections: 0 }, 'option --max-connections: expected an integer >= 1, got 0'],
    [
      { router: { defaultMinIntervalMs: 70_000 } },
      'option --min-interval-ms: expected an integer from 0 to 60000',
    ],
    [{ router: { retentionMs: -5 } }, 'option --retention-ms'],
    [{ maxFrameBytes: 1_000_000 }, 'option --max-frame-bytes'],
    [{ host: 'example.com' }, 'option --host: expected an IP address'],
    [{ host: '10.0.0.5' }, 'Pass --allow-remote'],
    [{ allowOrigins: ['evil.example'] }, 'option --allow-origin'],
    [{ secret: 'short' }, 'option --secret: expected at least 16 characters'],
    [
      { natsHeartbeatMs: 10 },
      `option --nats-heartbeat-ms: expected an integer from ${MIN_NATS_HEARTBEAT_MS} to`,
    ],
  ])('refuses %j', (input, message) => {
    expect(() => resolveDaemonOptions({ runtimeDir: '/r', ...input }, {})).toThrow(message);
  });

  it('allows a non-loopback host with allowRemote', () => {
    expect(
      resolveDaemonOptions({ runtimeDir: '/r', host: '0.0.0.0', allowRemote: true }, {}).host,
    ).toBe('0.0.0.0');
  });
});

describe('the daemon option table', () => {
  it('drives the defaults: every integer option resolves to its default where the daemon reads it', () => {
    const options = resolveDaemonOptions({ runtimeDir: '/r' }, {});
    for (const spec of DAEMON_OPTIONS) {
      if (spec.kind !== 'integer') continue;
      const value =
        'router' in spec.key
          ? options.router[spec.key.router]
          : options[spec.key.daemon as keyof typeof options];
      expect(value, spec.name).toBe(spec.default);
    }
  });

  it('drives validation: each integer option below its minimum is refused by its flag name', () => {
    for (const spec of DAEMON_OPTIONS) {
      if (spec.kind !== 'integer') continue;
      const input = optionsInput(new Map([[spec, spec.min - 1]]));
      expect(() => resolveDaemonOptions({ runtimeDir: '/r', ...input }, {}), spec.name).toThrow(
        `option --${spec.name}: expected an integer`,
      );
    }
  });

  it('drives --help: every flag once, with its default', () => {
    const help = optionsHelp(DAEMON_FLAGS, 27);
    for (const spec of DAEMON_FLAGS) {
      const flagLine = new RegExp(`^  --${spec.name}( |$)`, 'gm');
      expect(help.match(flagLine), spec.name).toHaveLength(1);
      if (spec.kind === 'integer') expect(help).toContain(String(spec.default));
    }
    for (const spec of DAEMON_OPTIONS.filter((o) => o.libraryOnly))
      expect(help).not.toContain(`--${spec.name}`);
    for (const line of help.split('\n')) expect(line.length, line).toBeLessThanOrEqual(80);
  });
});
