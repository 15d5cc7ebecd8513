/**
 * The session hub without a daemon: a real router, transports that are
 * plain objects (the hub's own boundary is a function call, not a socket).
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_ROUTER_OPTIONS, Router } from '../../src/daemon/router.js';
import { type Payload, SessionHub, type SessionTransport } from '../../src/daemon/sessions.js';
import {
  doneNotification,
  type Notification,
  progressNotification,
} from '../../src/protocol/notifications.js';
import { silentLogger } from '../../src/shared/log.js';

interface Probe extends SessionTransport {
  readonly written: Notification[];
  unread: number;
  closedSlow: number;
}

function probe(writes = true): Probe {
  const written: Notification[] = [];
  const transport: Probe = {
    written,
    unread: 0,
    closedSlow: 0,
    unreadBytes: () => transport.unread,
    closeSlow: () => {
      transport.closedSlow++;
    },
  };
  if (writes) transport.write = (notification) => written.push(notification);
  return transport;
}

/** A hub and a router wired as the daemon wires them, recording when subscribers are removed. */
function setup(maxSessions = 10, maxSessionBufferBytes = 1000) {
  const events: string[] = [];
  let publishing = false;
  let router: Router | undefined;
  const hub = new SessionHub(
    { maxSessions, maxSessionBufferBytes },
    (id) => {
      events.push(`${publishing ? 'inside' : 'after'} publish: remove ${id}`);
      router?.removeSubscriber(id);
    },
    silentLogger,
  );
  router = new Router({ ...DEFAULT_ROUTER_OPTIONS, defaultMinIntervalMs: 0 }, hub.deliver);
  const publish = (token: string, progress: number) => {
    publishing = true;
    try {
      return router.publish(1, { v: 1, progressToken: token, progress }, 0);
    } finally {
      publishing = false;
    }
  };
  return { hub, router, events, publish };
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('session hub', () => {
  it('a session dropped during delivery is removed from the router after the publish, never inside it', async () => {
    const { hub, router, events, publish } = setup();
    const slow = probe();
    const first = probe();
    const last = probe();
    const ids = [first, slow, last].map((transport) => hub.open('websocket', transport).id ?? -1);
    for (const id of ids) router.subscribe(id, { progressToken: 't' }, 0);
    slow.unread = 5000;
    publish('t', 1);
    expect(slow.closedSlow).toBe(1);
    expect(hub.slowSessionsClosed).toBe(1);
    // The others were delivered to in the same loop; the slow one is let go but not yet removed.
    expect(first.written).toHaveLength(1);
    expect(last.written).toHaveLength(1);
    expect(events).toEqual([]);
    expect(router.stats().subscriptions).toBe(3);
    await settled();
    expect(events).toEqual([`after publish: remove ${ids[1]}`]);
    expect(router.stats().subscriptions).toBe(2);
    publish('t', 2);
    expect(slow.written).toHaveLength(1);
    expect(last.written).toHaveLength(2);
    expect(hub.count).toBe(2);
  });

  it('caps every kind together and frees a place when a session closes', () => {
    const { hub } = setup(3);
    const ws = hub.open('websocket', probe()).id;
    const mcp = hub.open('mcp', probe(false)).id;
    const local = hub.openLocal(() => {});
    expect(hub.count).toBe(3);
    expect([hub.countOf('websocket'), hub.countOf('mcp'), hub.countOf('in-process')]).toEqual([
      1, 1, 1,
    ]);
    // open says why, in the same words as refusal().
    for (const refused of [hub.open('websocket', probe()), hub.open('mcp', probe(false))])
      expect(refused).toMatchObject({
        id: undefined,
        refused: { code: 'too_many_sessions', message: expect.stringContaining('--max-sessions') },
      });
    expect(() => hub.openLocal(() => {})).toThrow(/--max-sessions/);
    expect(hub.refusal()).toMatchObject({
      code: 'too_many_sessions',
      message: expect.stringContaining('--max-sessions'),
    });
    // Members of an /mcp session share its place.
    if (mcp === undefined || ws === undefined) throw new Error('not admitted');
    hub.openMember(mcp, () => {});
    hub.openMember(mcp, () => {});
    expect(hub.count).toBe(3);
    local.close();
    expect(hub.count).toBe(2);
    expect(hub.open('websocket', probe()).id).toBeDefined();
  });

  it('refuses every kind of new session once the daemon stops; those open stay', () => {
    const { hub } = setup(10);
    const open = hub.open('websocket', probe()).id;
    hub.refuseNewSessions();
    expect(hub.refusal()).toMatchObject({ code: 'daemon_stopping' });
    for (const kind of ['websocket', 'mcp', 'page'] as const)
      expect(hub.open(kind, probe(kind === 'websocket'))).toMatchObject({
        id: undefined,
        refused: { code: 'daemon_stopping' },
      });
    let thrown: unknown;
    try {
      hub.openLocal(() => {});
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: 'daemon_stopping' });
    expect(hub.count).toBe(1);
    if (open === undefined) throw new Error('not admitted');
    hub.close(open);
    expect(hub.count).toBe(0);
  });

  it('a member gets a progress inside the delivery when nothing waits before it, a done after it, and what follows a done behind it', async () => {
    const { hub, router, publish } = setup(10, 2500);
    const transport = probe(false);
    const session = hub.open('mcp', transport).id;
    if (session === undefined) throw new Error('not admitted');
    const got: string[] = [];
    const member = hub.openMember(session, (n) =>
      got.push(
        'progress' in n.params
          ? `${n.params.progressToken}${n.params.progress}`
          : `done ${n.params.progressToken}`,
      ),
    );
    router.subscribe(member.id, { progressToken: 'm' }, 0);
    router.subscribe(member.id, { progressToken: 'n' }, 0);
    publish('m', 1);
    // Handed over before publish returned.
    expect(got).toEqual(['m1']);
    router.finish(1, { v: 1, progressToken: 'n' }, 0);
    publish('m', 2);
    // The done waits for the router's update to end, and the progress behind it waits for the done.
    expect(got).toEqual(['m1']);
    await settled();
    expect(got).toEqual(['m1', 'done n', 'm2']);
    publish('m', 3);
    expect(got).toEqual(['m1', 'done n', 'm2', 'm3']);
    // The /mcp transport's own backlog passes the cap: the session goes, and nothing more arrives.
    transport.unread = 2510;
    publish('m', 4);
    expect(transport.closedSlow).toBe(1);
    expect(hub.count).toBe(0);
    await settled();
    expect(router.stats().subscriptions).toBe(0);
    publish('m', 5);
    await settled();
    // Found slow before m4 was handed over: neither it nor m5 arrived.
    expect(got).toEqual(['m1', 'done n', 'm2', 'm3']);
  });

  it('messages queued for members behind the newest count as unread, across members', async () => {
    const { hub, router, publish } = setup(10, 2500);
    const transport = probe(false);
    const session = hub.open('mcp', transport).id;
    if (session === undefined) throw new Error('not admitted');
    const got: string[] = [];
    const a = hub.openMember(session, (n) => got.push(`a${n.params.progressToken}`));
    const b = hub.openMember(session, (n) => got.push(`b${n.params.progressToken}`));
    for (const [member, tokens] of [
      [a, ['xd', 'x']],
      [b, ['yd', 'y']],
    ] as const)
      for (const progressToken of tokens) router.subscribe(member.id, { progressToken }, 0);
    // The size of each message here, as the hub counts it (the tokens are of one length).
    const doneBytes = Buffer.byteLength(
      JSON.stringify(doneNotification({ progressToken: 'xd', status: 'ok' })),
    );
    const progressBytes = Buffer.byteLength(
      JSON.stringify(progressNotification({ v: 1, progressToken: 'x', progress: 1 }, 1)),
    );
    // Room for the transport's backlog, both dones and half a progress.
    transport.unread = 2500 - 2 * doneBytes - progressBytes / 2;
    const finish = (progressToken: string) => router.finish(1, { v: 1, progressToken }, 0);
    // Each done queues, and each progress behind its member's done: the newest is not counted.
    finish('xd');
    finish('yd');
    publish('x', 1);
    expect(transport.closedSlow).toBe(0);
    expect(got).toEqual([]);
    // A fourth: the three behind it pass the cap.
    publish('y', 1);
    expect(transport.closedSlow).toBe(1);
    expect(hub.count).toBe(0);
    await settled();
    expect(got).toEqual([]);
  });

  it('one message a member hands to its transport does not close a session that reads; a backlog past the cap does', () => {
    const cap = 1000;
    const { hub, router } = setup(10, cap);
    const transport = probe(false);
    const session = hub.open('mcp', transport).id;
    if (session === undefined) throw new Error('not admitted');
    // The member writes what it receives to the transport, where it stays unread until the test reads it.
    const member = hub.openMember(session, (n) => {
      transport.unread += Buffer.byteLength(JSON.stringify(n));
    });
    router.subscribe(member.id, { progressToken: 'big' }, 0);
    const big = (progress: number) =>
      router.publish(1, { v: 1, progressToken: 'big', progress, message: 'x'.repeat(1400) }, 0);
    big(1);
    expect(transport.unread).toBeGreaterThan(cap);
    expect(transport.closedSlow).toBe(0);
    transport.unread = 0;
    big(2);
    expect(transport.closedSlow).toBe(0);
    // Not read this time: what was waiting before the third already passes the cap.
    big(3);
    expect(transport.closedSlow).toBe(1);
    expect(hub.slowSessionsClosed).toBe(1);
  });

  it('one message larger than the room left does not close a session that reads; a backlog past the cap does', () => {
    const cap = 1000;
    const { hub, router } = setup(10, cap);
    const transport = probe();
    // What the transport was given stays unread until the test says it was read.
    transport.write = (notification, payload) => {
      transport.written.push(notification);
      transport.unread += payload.bytes;
    };
    const id = hub.open('websocket', transport).id ?? -1;
    router.subscribe(id, { progressToken: 'big' }, 0);
    const big = (progress: number) =>
      router.publish(1, { v: 1, progressToken: 'big', progress, message: 'x'.repeat(1400) }, 0);
    big(1);
    expect(transport.unread).toBeGreaterThan(cap);
    expect(transport.closedSlow).toBe(0);
    // The reader read it; the next one alone is as large again.
    transport.unread = 0;
    big(2);
    expect(transport.closedSlow).toBe(0);
    // Not read this time: what was waiting before the third already passes the cap.
    big(3);
    expect(transport.closedSlow).toBe(1);
    expect(hub.slowSessionsClosed).toBe(1);
    expect(transport.written).toHaveLength(3);
  });

  it('closing a session removes every member subscriber from the router', async () => {
    const { hub, router } = setup();
    const session = hub.open('mcp', probe(false)).id;
    if (session === undefined) throw new Error('not admitted');
    const a = hub.openMember(session, () => {});
    const b = hub.openMember(session, () => {});
    router.subscribe(a.id, { progressToken: 'x' }, 0);
    router.subscribe(b.id, { progressToken: 'y' }, 0);
    expect(router.stats().subscriptions).toBe(2);
    hub.close(session);
    await settled();
    expect(router.stats().subscriptions).toBe(0);
  });

  it('serialises a notification once for every session it goes to', () => {
    const { hub, router, publish } = setup();
    const payloads: Payload[] = [];
    for (let i = 0; i < 3; i++) {
      const id = hub.open('websocket', {
        write: (_n, payload) => payloads.push(payload),
        unreadBytes: () => 0,
        closeSlow: () => {},
      }).id;
      if (id !== undefined) router.subscribe(id, { progressToken: 's' }, 0);
    }
    publish('s', 1);
    expect(payloads).toHaveLength(3);
    expect(new Set(payloads).size).toBe(1);
    expect(JSON.parse(payloads[0]?.text ?? '')).toMatchObject({ params: { progress: 1 } });
    expect(hub.notificationsSent).toBe(3);
  });
});
