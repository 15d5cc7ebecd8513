/**
 * The runtime-dir lock against another local user (issue 23.2): it must sit where only the
 * daemon's user reaches it. The attacks are run as a real second user (created as root).
 *
 * The attacker learns the lock's name where any user can see it: /proc/net/unix lists every
 * bound socket, abstract names included.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAll, runCli, startDaemon, tempDir, waitForExit } from '../helpers/daemon.js';
import { OTHER_USER, otherUser, spawnAsOtherUser } from '../helpers/other-user.js';

afterEach(cleanupAll);

/** How the attacker reaches a name from /proc/net/unix: an abstract name is shown with a leading @. */
const ADDRESS = `
import socket, sys
def address(name):
    return '\\0' + name[1:] if name.startswith('@') else name
`;

/**
 * The names of the daemon's bound Unix sockets, as /proc/net/unix shows them to every user (the
 * test picks the daemon's own by the inodes of its fds, so that other daemons on the machine are
 * left alone), and the lock's path inside the runtime dir.
 */
function daemonSocketNames(pid: number, runtimeDir: string): string[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    const target = readlinkSync(`/proc/${pid}/fd/${fd}`, { encoding: 'utf8' });
    const match = /^socket:\[(\d+)\]$/.exec(target);
    if (match?.[1] !== undefined) inodes.add(match[1]);
  }
  const names = new Set([join(runtimeDir, 'daemon.lock')]);
  for (const line of readFileSync('/proc/net/unix', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    const inode = fields[6];
    const name = fields[7];
    if (inode !== undefined && name !== undefined && inodes.has(inode)) names.add(name);
  }
  return [...names];
}

/** Learns the names while the daemon lives; on "go" binds each it can; holds them until stdin closes. */
const SQUAT = `${ADDRESS}
seen = sys.argv[1:]
sys.stdin.readline()
held = []
for name in seen:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(address(name))
        s.listen(128)
        held.append(s)
    except OSError:
        pass
print('bound', len(held), flush=True)
sys.stdin.read()
`;

/** Opens up to COUNT connections to each name; prints how many were accepted, and holds them. */
const FLOOD = `${ADDRESS}
count = int(sys.argv[1])
held = []
for name in sys.argv[2:]:
    for _ in range(count):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            break
        try:
            s.connect(address(name))
            held.append(s)
        except OSError:
            s.close()
            break
print('connected', len(held), flush=True)
sys.stdin.read()
`;

/** The next line the attacker prints that starts with `word`, as a number. */
function nextFigure(attacker: ReturnType<typeof spawnAsOtherUser>, word: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    let errors = '';
    const onData = (chunk: string) => {
      text += chunk;
      const match = new RegExp(`^${word} (\\d+)$`, 'm').exec(text);
      if (match === null) return;
      attacker.stdout?.off('data', onData);
      resolve(Number(match[1]));
    };
    attacker.stdout?.setEncoding('utf8').on('data', onData);
    attacker.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      errors += chunk;
    });
    attacker.once('exit', (code) =>
      reject(new Error(`the attacker exited (${code}) before saying "${word}": ${errors}`)),
    );
  });
}

describe.skipIf(otherUser.skip)(`the runtime-dir lock against another user (${OTHER_USER})`, () => {
  beforeAll(() => otherUser.require());
  it('a name squatted after kill -9 does not keep the next daemon out', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon([], runtimeDir);
    const squatter = spawnAsOtherUser(SQUAT, ...daemonSocketNames(first.info.pid, runtimeDir));
    try {
      first.child.kill('SIGKILL');
      await waitForExit(first.child);
      const bound = nextFigure(squatter, 'bound');
      squatter.stdin?.write('go\n');
      // Whatever it managed to bind (before the fix: the lock's abstract name), it holds now.
      await bound;
      const second = await startDaemon([], runtimeDir);
      expect((await runCli(['status', '--runtime-dir', runtimeDir])).code).toBe(0);
      await second.stop();
    } finally {
      squatter.kill('SIGKILL');
      await waitForExit(squatter);
    }
  });

  it('cannot open a single connection to the lock, so a flood of them pins nothing', async () => {
    const daemon = await startDaemon();
    const names = daemonSocketNames(daemon.info.pid, daemon.runtimeDir);
    const flooder = spawnAsOtherUser(FLOOD, '500', ...names);
    try {
      expect(await nextFigure(flooder, 'connected')).toBe(0);
      const status = await runCli(['status', '--json', '--runtime-dir', daemon.runtimeDir]);
      expect(status.code).toBe(0);
      const info = JSON.parse(readFileSync(join(daemon.runtimeDir, 'daemon.json'), 'utf8'));
      expect(info.pid).toBe(daemon.child.pid);
    } finally {
      flooder.kill('SIGKILL');
      await waitForExit(flooder);
      await daemon.stop();
    }
  });
});
