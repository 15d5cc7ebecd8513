/** `mcp-progress run`'s logic without a daemon or a child: its command line, and how an end maps to done. */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.js';
import { outcomeOf, planRun } from '../../src/cli/run-command.js';

describe('planRun', () => {
  const env = { MCP_PROGRESS_SOCKET: '/run/x/bridge.sock' };

  it('takes the command after -- or at the first word that is not a flag, flags of CMD left alone', () => {
    expect(planRun(['--token', 't', '--', 'sh', '-c', 'exit 0'], env)).toEqual({
      file: 'sh',
      args: ['-c', 'exit 0'],
      token: 't',
      madeToken: false,
      socketPath: '/run/x/bridge.sock',
      parseOutput: false,
    });
    expect(planRun(['--parse', '--token', 't', 'ninja', '-C', 'build'], env)).toMatchObject({
      file: 'ninja',
      args: ['-C', 'build'],
      parseOutput: true,
    });
  });

  it('uses $MCP_PROGRESS_TOKEN, else makes a token and says so', () => {
    expect(planRun(['true'], { ...env, MCP_PROGRESS_TOKEN: 'from-env' })).toMatchObject({
      token: 'from-env',
      madeToken: false,
    });
    expect(planRun(['true'], env, () => 'run-made')).toMatchObject({
      token: 'run-made',
      madeToken: true,
    });
  });

  it('answers help, and refuses a missing command or an empty token as usage errors', () => {
    expect(planRun(['--help'], env)).toBe('help');
    expect(() => planRun(['--token', 'x'], env)).toThrow(UsageError);
    expect(() => planRun(['--token', 'x'], env)).toThrow(/no command/);
    expect(() => planRun(['--token', '', 'true'], env)).toThrow(/non-empty/);
    expect(() => planRun(['--bogus', '--', 'true'], env)).toThrow(UsageError);
  });
});

describe('outcomeOf', () => {
  it('passes the exit code through: ok on 0, error otherwise', () => {
    expect(outcomeOf('sh', { code: 0, signal: null }, false)).toEqual({
      exitCode: 0,
      status: 'ok',
      message: 'sh exited with code 0',
    });
    expect(outcomeOf('sh', { code: 3, signal: null }, false)).toMatchObject({
      exitCode: 3,
      status: 'error',
    });
  });

  it('exits 128 + N for a signal N; a cancel or SIGINT (Ctrl-C) is cancelled, other signals error', () => {
    expect(outcomeOf('sh', { code: null, signal: 'SIGTERM' }, true)).toEqual({
      exitCode: 143,
      status: 'cancelled',
      message: 'sh was killed by SIGTERM',
    });
    expect(outcomeOf('sh', { code: null, signal: 'SIGTERM' }, false).status).toBe('error');
    expect(outcomeOf('sh', { code: null, signal: 'SIGINT' }, false)).toEqual({
      exitCode: 130,
      status: 'cancelled',
      message: 'sh was killed by SIGINT',
    });
    expect(outcomeOf('sh', { code: null, signal: 'SIGKILL' }, false)).toMatchObject({
      exitCode: 137,
      status: 'error',
    });
    // A command that caught the cancel's SIGTERM and exited cleanly was still stopped by it.
    expect(outcomeOf('sh', { code: 0, signal: null }, true).status).toBe('cancelled');
  });

  it('exits 127 when CMD does not exist, 126 when it cannot run', () => {
    const missing = Object.assign(new Error('spawn nope ENOENT'), { code: 'ENOENT' });
    expect(outcomeOf('nope', { code: null, signal: null, error: missing }, false)).toEqual({
      exitCode: 127,
      status: 'error',
      message: 'command not found: nope',
    });
    const denied = Object.assign(new Error('spawn ./x EACCES'), { code: 'EACCES' });
    expect(outcomeOf('./x', { code: null, signal: null, error: denied }, false)).toMatchObject({
      exitCode: 126,
      message: 'cannot run ./x: spawn ./x EACCES',
    });
  });
});
