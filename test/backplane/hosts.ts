/** Daemons on the backplane, and what their sessions received, for the backplane tests. */
import { expect } from 'vitest';
import { eventually, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import type { GatewayClient, Received } from '../helpers/gateway.js';

export const GRACE_MS = 1000;

export function hostArgs(url: string, name: string, extra: string[] = []): string[] {
  return ['--nats', url, '--nats-name', name, '--abandon-grace-ms', String(GRACE_MS), ...extra];
}

/** Starts a daemon on the backplane and waits until it has joined. */
export async function startHost(
  url: string,
  name: string,
  extra: string[] = [],
  runtimeDir?: string,
): Promise<RunningDaemon> {
  const daemon = await startDaemon(hostArgs(url, name, extra), runtimeDir);
  await joined(daemon, name);
  return daemon;
}

export function joined(daemon: RunningDaemon, name: string, times = 1): Promise<true> {
  return eventually(
    () => (daemon.stderr().split('backplane: joined').length > times ? true : undefined),
    15_000,
    `${name} to join the backplane`,
  );
}

let counter = 0;
export const fresh = (name: string) => `${name}-${process.pid}-${++counter}`;

export function notificationsOf(gateway: GatewayClient, token: unknown): Received[] {
  return gateway.notifications.filter((n) => n.params.progressToken === token);
}

export function progressOf(gateway: GatewayClient, token: unknown): unknown[] {
  return notificationsOf(gateway, token)
    .filter((n) => n.method === 'notifications/progress')
    .map((n) => n.params.progress);
}

export async function subscribe(
  gateway: GatewayClient,
  progressToken: unknown,
  as?: unknown,
): Promise<void> {
  const params: Record<string, unknown> = { progressToken, minIntervalMs: 0 };
  if (as !== undefined) params.as = as;
  const reply = await gateway.request('progress/subscribe', params);
  if (reply.error) throw new Error(`subscribe: ${reply.error.message}`);
}

export function doneOf(gateway: GatewayClient, token: unknown): Promise<Received['params']> {
  return eventually(
    () =>
      notificationsOf(gateway, token).find((n) => n.method === 'notifications/progress/done')
        ?.params,
    20_000,
    `done for ${JSON.stringify(token)}`,
  );
}

/** Waits until the session saw this progress value for the token. */
export function sawProgress(
  gateway: GatewayClient,
  token: unknown,
  progress: number,
): Promise<true> {
  return eventually(
    () => (progressOf(gateway, token).includes(progress) ? true : undefined),
    20_000,
    `progress ${progress} for ${JSON.stringify(token)}`,
  );
}

export function expectIncreasing(received: Received[]): void {
  const values = received
    .filter((n) => n.method === 'notifications/progress')
    .map((n) => n.params.progress as number);
  for (let i = 1; i < values.length; i++) expect(values[i]).toBeGreaterThan(values[i - 1] ?? 0);
}

export async function streamOn(
  gateway: GatewayClient,
  token: unknown,
): Promise<Record<string, unknown> | undefined> {
  const reply = await gateway.request('progress/get', { progressToken: token });
  return (reply.result as { stream?: Record<string, unknown> }).stream;
}
