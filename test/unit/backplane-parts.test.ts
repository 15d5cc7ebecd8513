/** The backplane's parts that know no NATS: its names on NATS, and the table of the other hosts. */
import { describe, expect, it } from 'vitest';
import { BackplaneSubjects, tokenSubject } from '../../src/daemon/backplane-names.js';
import { RemoteHosts } from '../../src/daemon/remote-hosts.js';
import {
  MAX_HOST_NAME_BYTES,
  MAX_MESSAGE_BYTES,
  utf8ByteLength,
} from '../../src/protocol/limits.js';
import {
  BACKPLANE_MAX_HOSTS,
  BACKPLANE_MAX_STREAMS_PER_HOST,
  BACKPLANE_MISSED_HEARTBEATS,
} from '../../src/shared/defaults.js';
import { createLogger } from '../../src/shared/log.js';
import { eventually } from '../helpers/daemon.js';

describe('BackplaneSubjects', () => {
  const subjects = new BackplaneSubjects('team-a.progress', 'gpu-1');

  it('a live and a kept stream subject name its host and its token, "7" and 7 apart', () => {
    expect(tokenSubject('7')).not.toBe(tokenSubject(7));
    for (const token of ['7', 7, 'render.1 *>']) {
      const live = subjects.streamOf(token);
      const kept = subjects.keptOf(token);
      expect(live.startsWith('team-a.progress.s.gpu-1.')).toBe(true);
      expect(kept.startsWith('team-a.progress.k.gpu-1.')).toBe(true);
      for (const subject of [live, kept]) {
        expect(subjects.parseStream(subject)).toEqual({
          host: 'gpu-1',
          token: tokenSubject(token),
        });
      }
    }
    expect(subjects.allStreams).toBe('team-a.progress.s.>');
    expect(subjects.allKept).toBe('team-a.progress.k.>');
  });

  it('a subject that is not host.token under the prefix is not a stream subject', () => {
    for (const kind of ['s', 'k']) {
      expect(subjects.parseStream(`team-a.progress.${kind}.gpu-1`)).toBeUndefined();
      expect(subjects.parseStream(`team-a.progress.${kind}..abc`)).toBeUndefined();
      expect(subjects.parseStream(`team-a.progress.${kind}.gpu-1.a.b`)).toBeUndefined();
    }
    expect(subjects.parseStream('team-a.progress.h.gpu-1.abc')).toBeUndefined();
    expect(subjects.parseStream('team-b.progress.s.gpu-1.abc')).toBeUndefined();
  });

  it('heartbeats, cancels and the store are named from the prefix', () => {
    expect(subjects.heartbeatHost(subjects.heartbeatOf('desk-2'))).toBe('desk-2');
    expect(subjects.allHeartbeats).toBe('team-a.progress.h.*');
    expect(subjects.cancelOf('desk-2')).toBe('team-a.progress.c.desk-2');
    expect(subjects.store).toBe('team-a_progress_streams');
  });
});

describe('RemoteHosts', () => {
  function table(abandonGraceMs = 1) {
    let now = 1000;
    const abandoned: Array<{ tokens: readonly unknown[]; reason: string }> = [];
    let onAbandon: () => void = () => {};
    const logged: string[] = [];
    const hosts = new RemoteHosts({
      log: createLogger('info', (line) => logged.push(line)),
      now: () => now,
      heartbeatMs: 100,
      abandonGraceMs,
      abandon: (tokens, reason) => {
        abandoned.push({ tokens, reason });
        onAbandon();
      },
    });
    return {
      hosts,
      abandoned,
      logged,
      advance: (ms: number) => {
        now += ms;
      },
      nextAbandon: () => new Promise<void>((resolve) => (onAbandon = resolve)),
    };
  }

  it('gives each host one connection of its own, never a worker id, and keeps at most BACKPLANE_MAX_HOSTS', () => {
    const { hosts } = table();
    const a = hosts.named('a');
    expect(hosts.named('a')).toBe(a);
    expect(a?.connection).toBeLessThan(0);
    expect(hosts.ofConnection(a?.connection ?? 0)).toBe(a);
    for (let i = 1; i < BACKPLANE_MAX_HOSTS; i++) expect(hosts.named(`h${i}`)).toBeDefined();
    expect(hosts.named('one-too-many')).toBeUndefined();
  });

  it('when full, a new host takes the place of the host heard least long ago only if it is silent', () => {
    const { hosts, abandoned, advance } = table();
    const old = hosts.named('old');
    if (old === undefined) throw new Error('no host');
    hosts.setOwner('old-job', old);
    advance(BACKPLANE_MISSED_HEARTBEATS * 100 + 1);
    for (let i = 1; i < BACKPLANE_MAX_HOSTS; i++) expect(hosts.named(`h${i}`)).toBeDefined();
    const real = hosts.named('real-new-host');
    expect(real).toBeDefined();
    expect(hosts.ofConnection(old.connection)).toBeUndefined();
    expect(abandoned).toEqual([
      { tokens: ['old-job'], reason: expect.stringContaining('host old was not heard from') },
    ]);
    // Every host now was heard recently: a crowd of new names pushes none of them out.
    expect(hosts.named('invented')).toBeUndefined();
    expect(hosts.named('real-new-host')).toBe(real);
  });

  it('keeps at most BACKPLANE_MAX_STREAMS_PER_HOST tokens of one host', () => {
    const { hosts, advance } = table();
    const a = hosts.named('a');
    const b = hosts.named('b');
    if (a === undefined || b === undefined) throw new Error('no host');
    for (let i = 0; i < BACKPLANE_MAX_STREAMS_PER_HOST; i++)
      expect(hosts.setOwner(i, a)).toBe(true);
    expect(hosts.setOwner('one-more', a)).toBe(false);
    expect(hosts.ownerOf('one-more')).toBeUndefined();
    expect(hosts.setOwner(0, a)).toBe(true);
    expect(hosts.setOwner('one-more', b)).toBe(true);
    advance(1);
    hosts.review((token) => token !== 0);
    expect(hosts.setOwner('room-again', a)).toBe(true);
  });

  it('a host silent for BACKPLANE_MISSED_HEARTBEATS is lost, and its tokens are abandoned after the grace', async () => {
    const { hosts, abandoned, advance, nextAbandon } = table();
    const a = hosts.named('a');
    const b = hosts.named('b');
    if (a === undefined || b === undefined) throw new Error('no host');
    hosts.setOwner('a-job', a);
    hosts.setOwner('b-job', b);
    // Reviewed at each heartbeat, as the backplane does.
    for (let beat = 1; beat < BACKPLANE_MISSED_HEARTBEATS; beat++) {
      advance(100);
      hosts.review(() => true);
    }
    advance(99);
    hosts.seen(b);
    advance(2);
    const abandon = nextAbandon();
    hosts.review(() => true);
    expect([a.lost, b.lost]).toEqual([true, false]);
    await abandon;
    expect(abandoned).toEqual([
      { tokens: ['a-job'], reason: expect.stringContaining('host a left the backplane') },
    ]);
  });

  it('the reasons that name a host fit a done message: with a name of MAX_HOST_NAME_BYTES, at most MAX_MESSAGE_BYTES', async () => {
    const longest = 'l'.repeat(MAX_HOST_NAME_BYTES);
    // Lost, and not back within the grace.
    const graceRanOut = table();
    const lost = graceRanOut.hosts.named(longest);
    if (lost === undefined) throw new Error('no host');
    graceRanOut.hosts.setOwner('job', lost);
    const abandon = graceRanOut.nextAbandon();
    graceRanOut.hosts.lose(lost, 'silent');
    await abandon;
    // Silent, and pushed out of a full table by a new host.
    const full = table();
    const silent = full.hosts.named(longest);
    if (silent === undefined) throw new Error('no host');
    full.hosts.setOwner('job', silent);
    full.advance(BACKPLANE_MISSED_HEARTBEATS * 100 + 1);
    for (let i = 1; i <= BACKPLANE_MAX_HOSTS; i++) full.hosts.named(`h${i}`);
    const reasons = [...graceRanOut.abandoned, ...full.abandoned].map(({ reason }) => reason);
    expect(reasons).toEqual([
      expect.stringContaining(`host ${longest} left the backplane`),
      expect.stringContaining(`host ${longest} was not heard from`),
    ]);
    for (const reason of reasons) {
      expect(utf8ByteLength(reason)).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    }
  });

  it('a review long after the one before finds this daemon stood still: nobody is lost, and every host gets a fresh window', () => {
    const { hosts, advance } = table();
    const a = hosts.named('a');
    if (a === undefined) throw new Error('no host');
    hosts.review(() => true);
    // Asleep for ten heartbeats: a's heartbeats of that time are unread, not missing.
    advance(1000);
    hosts.review(() => true);
    expect(a.lost).toBe(false);
    // Reviewed at each heartbeat again, a stays silent: lost after BACKPLANE_MISSED_HEARTBEATS.
    for (let beat = 1; beat <= BACKPLANE_MISSED_HEARTBEATS; beat++) {
      expect(a.lost).toBe(false);
      advance(100);
      hosts.review(() => true);
    }
    expect(a.lost).toBe(false);
    advance(1);
    hosts.review(() => true);
    expect(a.lost).toBe(true);
  });

  it('a grace that runs out after this daemon stood still starts again: the host, heard meanwhile, keeps its streams', async () => {
    const { hosts, abandoned, logged, advance, nextAbandon } = table(20);
    const a = hosts.named('a');
    if (a === undefined) throw new Error('no host');
    hosts.setOwner('a-job', a);
    hosts.lose(a, 'silent');
    // Asleep for ten heartbeats, past the grace: the grace runs first on waking, before the reads.
    advance(1000);
    await eventually(
      () => (logged.some((line) => line.includes('this daemon stood still')) ? true : undefined),
      5000,
      'the grace to start again',
    );
    expect(logged.at(-1)).toContain('host a gets a fresh 0.02 s');
    expect([a.lost, abandoned]).toEqual([true, []]);
    // Its heartbeat, read after the timers: back, and nothing is abandoned.
    hosts.seen(a);
    expect([a.lost, a.graceTimer, abandoned]).toEqual([false, undefined, []]);
    // Lost again and not back: the grace that ran out on time ends its streams.
    const abandon = nextAbandon();
    hosts.lose(a, 'stopped');
    await abandon;
    expect(abandoned).toEqual([
      { tokens: ['a-job'], reason: expect.stringContaining('(its daemon stopped)') },
    ]);
  });

  it('a lost host heard again is back, and nothing is abandoned', async () => {
    const { hosts, abandoned } = table(20);
    const a = hosts.named('a');
    if (a === undefined) throw new Error('no host');
    hosts.setOwner('a-job', a);
    hosts.lose(a, 'stopped');
    hosts.seen(a);
    expect(a.lost).toBe(false);
    expect(a.graceTimer).toBeUndefined();
    expect(abandoned).toEqual([]);
  });

  it('review forgets tokens no longer known, then lost hosts with nothing left', async () => {
    const { hosts, nextAbandon } = table();
    const a = hosts.named('a');
    if (a === undefined) throw new Error('no host');
    hosts.setOwner('gone', a);
    const abandon = nextAbandon();
    hosts.lose(a, 'stopped');
    await abandon;
    hosts.review(() => true);
    expect(hosts.ofConnection(a.connection)).toBe(a);
    hosts.review(() => false);
    expect(hosts.ownerOf('gone')).toBeUndefined();
    expect(hosts.ofConnection(a.connection)).toBeUndefined();
    expect([...hosts.all()]).toEqual([]);
  });
});
