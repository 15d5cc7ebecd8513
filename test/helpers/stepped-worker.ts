/**
 * Workers driven in steps (test/fixtures/windows_worker.mjs, c_worker.c): each prints JSON events
 * a line and publishes value N only once the test wrote `ack-N` (it saw value N-1 arrive), so that
 * every value is seen with no timing in the test. Shared by the Linux and the Windows tests.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { eventually } from './daemon.js';
import type { GatewayClient } from './gateway.js';

/** Anything whose stdout can be read so far: a Linux child's collected output, a Wine file. */
export interface PrintsEvents {
  stdout(): string;
  stderr(): string;
}

export type WorkerEvent = Record<string, unknown>;

export function events(worker: PrintsEvents): WorkerEvent[] {
  return worker
    .stdout()
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as WorkerEvent);
}

export function waitForEvent(worker: PrintsEvents, name: string): Promise<WorkerEvent> {
  return eventually(
    () => events(worker).find((event) => event.event === name),
    60_000,
    () => `the worker's "${name}" (stdout: ${worker.stdout()} stderr: ${worker.stderr()})`,
  );
}

/** Lets the worker publish 1..values, each once `seen(value)` holds. */
export async function stepThrough(
  steps: string,
  values: number,
  seen: (value: number) => boolean,
): Promise<void> {
  for (let value = 1; value <= values; value++) {
    await eventually(() => (seen(value) ? true : undefined), 60_000, `progress ${value}`);
    writeFileSync(join(steps, `ack-${value}`), '');
  }
}

const PROGRESS = 'notifications/progress';
const DONE = 'notifications/progress/done';

/** The progress values `gateway` got for `token`, in order. */
export function progressValues(gateway: GatewayClient, token: string): unknown[] {
  return gateway.notifications
    .filter((n) => n.method === PROGRESS && n.params.progressToken === token)
    .map((n) => n.params.progress);
}

/**
 * Waits until `gateway`'s daemon (one started again under a worker) counts the worker's
 * connection: an update the worker makes while it is away fails (the C client keeps the newest
 * for the next connection, and says so on stderr), so a test's next step waits for the worker's
 * polling, backing off, to connect again (within 2 s).
 */
export async function untilWorkerConnected(gateway: GatewayClient): Promise<void> {
  await eventually(
    async () => {
      const reply = await gateway.request('progress/status');
      return (reply.result as { connections: number }).connections === 1 ? true : undefined;
    },
    60_000,
    'the worker to connect again',
  );
}

/**
 * A worker started on `token` (after `gateway` subscribed to it, with steps in `steps`) is seen
 * to publish every value 1..values, in order, then its done once with its result, acked; each
 * step also waits for `alsoSeen` (another subscriber that must see every value).
 */
export async function expectEveryValueThenOneDone(
  gateway: GatewayClient,
  token: string,
  worker: PrintsEvents,
  steps: string,
  alsoSeen: (value: number) => boolean = () => true,
  values = 3,
): Promise<void> {
  const mine = (method: string) =>
    gateway.notifications.filter((n) => n.method === method && n.params.progressToken === token);
  await stepThrough(
    steps,
    values,
    (value) => mine(PROGRESS).some((n) => n.params.progress === value) && alsoSeen(value),
  );
  expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true, code: null });
  await eventually(() => (mine(DONE).length > 0 ? true : undefined), 30_000, 'the done');
  // One more round trip: anything the daemon sent before its answer has arrived.
  await gateway.request('progress/list', {});
  const progress = mine(PROGRESS);
  expect(progress.map((n) => n.params.progress)).toEqual(
    Array.from({ length: values }, (_, i) => i + 1),
  );
  expect(progress.at(-1)?.params).toMatchObject({ total: values, message: `step ${values}` });
  expect(mine(DONE)).toHaveLength(1);
  expect(mine(DONE)[0]?.params).toMatchObject({ status: 'ok', message: 'the result' });
}

/** A cancel of `token` from the gateway reaches the worker, with its reason. */
export async function expectCancelReaches(
  gateway: GatewayClient,
  token: string,
  worker: PrintsEvents,
): Promise<void> {
  await waitForEvent(worker, 'ready');
  await eventually(
    async () => {
      const reply = await gateway.request('progress/cancel', {
        progressToken: token,
        reason: 'stop',
      });
      return (reply.result as { workers?: number } | undefined)?.workers === 1 ? true : undefined;
    },
    60_000,
    'the cancel to reach a worker',
  );
  expect(await waitForEvent(worker, 'cancel')).toMatchObject({ reason: 'stop' });
}
