/** The mcp-progress command: a thin dispatcher; each command parses its flags and calls the library. */
import { BridgeError } from '../shared/errors.js';
import { VERSION } from '../shared/version.js';
import { UsageError } from './args.js';
import { type Io, processIo } from './io.js';

type Command = (argv: string[], io: Io) => Promise<number>;

/**
 * Each command's module is loaded when that command runs: `--version` or a
 * `publish` in a shell loop must not pay for the MCP SDK, ws and node-ipc
 * that only the daemon and the MCP commands use.
 */
const COMMANDS: Record<string, { load: () => Promise<Command>; summary: string }> = {
  daemon: {
    load: async () => (await import('./daemon-command.js')).daemonCommand,
    summary: 'run the bridge daemon in the foreground',
  },
  publish: {
    load: async () => (await import('./publish-command.js')).publishCommand,
    summary: 'send one progress or done frame and wait for the answer',
  },
  status: {
    load: async () => (await import('./status-command.js')).statusCommand,
    summary: "show the running daemon's figures",
  },
  schema: {
    load: async () => (await import('./schema-command.js')).schemaCommand,
    summary: 'print the JSON Schemas of protocol v1',
  },
  mcp: {
    load: async () => (await import('./mcp-command.js')).mcpCommand,
    summary: 'serve the progress tools to an MCP host over stdio',
  },
  run: {
    load: async () => (await import('./run-command.js')).runCommand,
    summary: 'run a command that publishes progress, and publish its done',
  },
  open: {
    load: async () => (await import('./open-command.js')).openCommand,
    summary: "open the daemon's live page of every job in a browser (or --print its URL)",
  },
  'nats-permissions': {
    load: async () => (await import('./nats-permissions-command.js')).natsPermissionsCommand,
    summary: "print a nats-server user's permissions that confine it to one daemon's subjects",
  },
  tail: {
    load: async () => (await import('./tail-command.js')).tailCommand,
    summary: 'watch streams live in the terminal (or as NDJSON)',
  },
};

export function mainHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  return `mcp-progress ${VERSION}: progress from worker processes to MCP sessions

Usage: mcp-progress <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, { summary }]) => `  ${name.padEnd(width)}  ${summary}`)
  .join('\n')}

Run "mcp-progress <command> --help" for a command's options.
  -h, --help     show this help
  -v, --version  print the version
`;
}

export async function main(argv: string[], io: Io = processIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    io.out(mainHelp());
    return name === undefined ? 2 : 0;
  }
  if (name === '-v' || name === '--version') {
    io.out(`${VERSION}\n`);
    return 0;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    io.err(`mcp-progress: unknown command ${JSON.stringify(name)}\n\n${mainHelp()}`);
    return 2;
  }
  try {
    const run = await command.load();
    return await run(rest, io);
  } catch (error) {
    // A daemon option out of range (--port 99999) came from this command line too.
    if (
      error instanceof UsageError ||
      (error instanceof BridgeError && error.code === 'invalid_option')
    ) {
      io.err(`mcp-progress ${name}: ${error.message}\n`);
      return 2;
    }
    if (error instanceof BridgeError) {
      io.err(`mcp-progress ${name}: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}
