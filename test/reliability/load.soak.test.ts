/**
 * Soak: honest jobs, gateways and hostile connections all at once for
 * SOAK_SECONDS (default 60). Nothing accepted is lost, every subscriber's
 * record strictly increases and ends with the newest value, and the daemon's
 * memory stops growing once warm.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, runCli, startDaemon } from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { honestPair } from '../helpers/honest.js';
import { rawWorker } from '../helpers/worker.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);

afterAll(() => cleanupAll());

interface Watched {
  last: number | undefined;
  done: boolean;
}

interface Job {
  token: string;
  frames: number;
}

describe(`soak for ${SECONDS} s`, () => {
  it('loses nothing, keeps every record ordered, and holds memory flat', async () => {
    const daemon = await startDaemon([
      '--frame-timeout-ms',
      '500',
      '--abandon-grace-ms',
      '1000',
      '--retention-ms',
      '2000',
    ]);
    const rss = async () =>
      JSON.parse((await runCli(['status', '--json', '--socket', daemon.info.socket])).stdout).memory
        .rss as number;
    const honest = await honestPair(daemon.info);
    honest.run(2);
    const gateways: GatewayClient[] = await Promise.all(
      [0, 1, 2, 3].map(() => connectGateway(daemon.info)),
    );
    // Checked as they arrive, so that a long soak does not hold every notification.
    const records = gateways.map(() => new Map<string, Watched>());
    const violations: string[] = [];
    for (const [g, gateway] of gateways.entries()) {
      gateway.ws.on('message', (data) => {
        const message = JSON.parse(String(data));
        if (message.method === undefined) return;
        const token = String(message.params.progressToken);
        const record = records[g]?.get(token) ?? { last: undefined, done: false };
        if (record.done) violations.push(`${token}: ${message.method} after done`);
        if (message.method === 'notifications/progress/done') {
          record.done = true;
        } else {
          if (record.last !== undefined && !(message.params.progress > record.last)) {
            violations.push(`${token}: ${message.params.progress} after ${record.last}`);
          }
          record.last = message.params.progress;
        }
        records[g]?.set(token, record);
      });
    }
    const truncate = setInterval(() => {
      for (const gateway of gateways) gateway.notifications.length = 0;
    }, 1000);
    const jobs: Job[] = [];
    const deadline = Date.now() + SECONDS * 1000;
    const samples: number[] = [];

    const jobRunner = async (worker: number) => {
      const socket = await rawWorker(daemon.info.socket);
      for (let round = 0; Date.now() < deadline; round++) {
        const job: Job = {
          token: `job-${worker}-${round}`,
          frames: 100 + ((worker * 37 + round) % 200),
        };
        // Each job is watched by two gateways, one with coalescing off and one with 50 ms.
        const [a, b] = [gateways[(worker + round) % 4], gateways[(worker + round + 1) % 4]];
        await a?.request('progress/subscribe', { progressToken: job.token, minIntervalMs: 0 });
        await b?.request('progress/subscribe', { progressToken: job.token, minIntervalMs: 50 });
        for (let i = 1; i <= job.frames; i++) {
          socket.send('progress', {
            v: 1,
            progressToken: job.token,
            progress: i,
            total: job.frames,
          });
          if (i % 50 === 0) await new Promise((r) => setTimeout(r, 1));
        }
        socket.send('done', { v: 1, progressToken: job.token, seq: round });
        await socket.reply(
          (r) => r.type === 'ack' && (r.data as { seq: number }).seq === round,
          30_000,
        );
        jobs.push(job);
      }
      socket.destroy();
    };

    const hostileRunner = async () => {
      const inputs = fc.sample(
        fc.oneof(
          fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
          fc.jsonValue().map((v) => `${JSON.stringify({ type: 'progress', data: v })}\f`),
          fc.string({ maxLength: 200 }),
        ),
        100_000,
      );
      let i = 0;
      while (Date.now() < deadline) {
        const socket = await rawWorker(daemon.info.socket);
        socket.write(inputs[i++ % inputs.length] ?? '');
        await Promise.race([socket.closed, new Promise((r) => setTimeout(r, 20))]);
        socket.destroy();
      }
      return i;
    };

    const sampler = async () => {
      while (Date.now() < deadline) {
        samples.push(await rss());
        await new Promise((r) => setTimeout(r, 2000));
      }
    };

    const [, , , , hostileHits] = await Promise.all([
      jobRunner(0),
      jobRunner(1),
      jobRunner(2),
      sampler(),
      hostileRunner(),
    ]);
    const honestFrames = await honest.finish();

    // Every job: both records strictly increased (checked on arrival) and ended with the final value, then done.
    await new Promise((r) => setTimeout(r, 500));
    clearInterval(truncate);
    expect(violations).toEqual([]);
    let checked = 0;
    for (const job of jobs) {
      for (const byToken of records) {
        const record = byToken.get(job.token);
        if (record === undefined) continue;
        expect(record, job.token).toEqual({ last: job.frames, done: true });
        checked++;
      }
    }
    expect(checked).toBe(jobs.length * 2);
    // Memory: no growth trend once warm (first third discarded).
    const warm = samples.slice(Math.floor(samples.length / 3));
    const growth = (warm.at(-1) ?? 0) - Math.min(...warm);
    console.log(
      `soak: ${SECONDS} s, ${jobs.length} jobs, ${honestFrames} honest frames, ${hostileHits} hostile connections, ` +
        `rss ${(Math.min(...warm) / 2 ** 20).toFixed(1)}..${(Math.max(...warm) / 2 ** 20).toFixed(1)} MiB`,
    );
    expect(growth).toBeLessThan(48 * 2 ** 20);
    for (const g of gateways) await g.close();
    expect(await daemon.stop()).toBe(0);
  });
});
