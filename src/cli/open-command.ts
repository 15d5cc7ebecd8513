import { spawn } from 'node:child_process';
import { PAGE_TICKET_TTL_MS } from '../shared/defaults.js';
import { readDaemonInfo, resolveRuntimeDir } from '../shared/locate.js';
import { mintPageTicket, pageUrl } from '../shared/page-ticket.js';
import { parse } from './args.js';
import type { Io } from './io.js';

export const OPEN_HELP = `Usage: mcp-progress open [--print] [--runtime-dir DIR]

Opens the daemon's live page (every job, its bar, state and last message, with
a cancel button) in a browser. Prints the page's one-time URL first: it works
once, within ${PAGE_TICKET_TTL_MS / 60_000} minutes, and trades its ticket for a cookie of this browser
(HttpOnly, SameSite=Strict) that outlives daemon restarts and admits for a day
(the daemon's --page-cookie-ms); a page kept open renews it, for a week at most
(--page-session-ms), then asks for "mcp-progress open" again. The daemon's
secret never appears in the URL. Exit 0 when the URL was made, 1 when no
daemon runs.

Options:
  --print              only print the URL (scripts, headless machines, another
                       browser profile); do not start a browser
  --runtime-dir DIR    the daemon's runtime dir (default:
                       $MCP_PROGRESS_RUNTIME_DIR, else the per-user default)
  -h, --help           show this help

The browser is $BROWSER when set, else xdg-open (Linux), open (macOS) or
start (Windows).
`;

export async function openCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parse('open', argv, {
    print: { type: 'boolean' },
    'runtime-dir': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    io.out(OPEN_HELP);
    return 0;
  }
  const info = await readDaemonInfo(resolveRuntimeDir(values['runtime-dir'], io.env));
  const url = pageUrl(info.url, mintPageTicket(info.secret));
  io.out(`${url}\n`);
  if (values.print) return 0;
  const [command, ...args] = browserCommand(io.env);
  const opened = await new Promise<string | undefined>((resolve) => {
    const child = spawn(command, [...args, url], { stdio: 'ignore', detached: true });
    child.once('error', (error) => resolve(error.message));
    child.once('spawn', () => {
      child.unref();
      resolve(undefined);
    });
  });
  if (opened !== undefined) {
    io.err(
      `mcp-progress open: could not start a browser (${command}: ${opened}): open the URL above yourself, or set $BROWSER\n`,
    );
  }
  return 0;
}

function browserCommand(env: Io['env']): [string, ...string[]] {
  const chosen = env.BROWSER?.trim();
  if (chosen) return [chosen];
  if (process.platform === 'darwin') return ['open'];
  if (process.platform === 'win32') return ['cmd', '/c', 'start', '""'];
  return ['xdg-open'];
}
