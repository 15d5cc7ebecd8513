/**
 * `run --parse` after CMD exited: how long run goes on reading CMD's stdout,
 * stderr and progress pipe. Everything CMD wrote before it exited is read,
 * however slowly run's own reader takes it; what a program CMD left running
 * writes to the pipes it inherited is read too, until they close, until they
 * stay quiet for a while, or for a bounded time once CMD's own output is
 * through. Then the pipes still open are closed.
 */
import {
  PIPE_MAX_BYTES,
  RUN_BACKGROUND_OUTPUT_MS,
  RUN_OUTPUT_QUIET_MS,
} from '../shared/defaults.js';

/** One of CMD's output pipes, as run reads it. */
export interface DrainedPipe {
  /** It closed: nothing holds it open any more. */
  readonly ended: boolean;
  /** Bytes read from it so far. */
  readonly bytesRead: number;
  /** Output waits to be passed on: read but not yet written (run's reader is slow), or not read while paused. */
  backedUp(): boolean;
  /** Stops reading it and closes it. */
  cut(): void;
}

export interface DrainTiming {
  /** Quiet this long (nothing came, nothing waited): the pipes are closed. */
  readonly quietMs: number;
  /** Once CMD's own output is through, the pipes are closed this long after at the latest. */
  readonly backgroundMs: number;
}

export const RUN_DRAIN_TIMING: DrainTiming = {
  quietMs: RUN_OUTPUT_QUIET_MS,
  backgroundMs: RUN_BACKGROUND_OUTPUT_MS,
};

/**
 * Resolves once every pipe ended or was cut. Call it when CMD has exited;
 * `allEnded` is how the caller says the last pipe ended.
 *
 * What CMD wrote before it exited is in a pipe (a pipe holds at most
 * PIPE_MAX_BYTES) or in run's buffers, ahead of anything written later. So
 * CMD's output in a pipe is through once the pipe was seen empty (a turn of
 * the event loop read nothing from it and nothing of it waits), or once more
 * than a full pipe was read from it since the exit. Only then may the
 * background bound cut it; the quiet rule cuts nothing that waits either.
 * A look is timed, then checked again after a turn of the loop, where what
 * waits in a pipe is read: a blocking write to run's slow reader may hold
 * the loop past a timer, and the timer alone would see no output come.
 */
export function drainAfterExit(
  pipes: readonly DrainedPipe[],
  timing: DrainTiming,
  onAllEnded: (ended: () => void) => void,
): Promise<void> {
  if (pipes.every((pipe) => pipe.ended)) return Promise.resolve();
  return new Promise((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const atExit = pipes.map((pipe) => pipe.bytesRead);
    const through = pipes.map(() => false);
    let throughAt: number | undefined;
    let lastLook = total();
    const finish = (cut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (cut) for (const pipe of pipes) if (!pipe.ended) pipe.cut();
      resolve();
    };
    onAllEnded(() => finish(false));

    function total(): number {
      return pipes.reduce((sum, pipe) => sum + pipe.bytesRead, 0);
    }

    const look = () => {
      if (settled) return;
      const before = pipes.map((pipe) => pipe.bytesRead);
      setImmediate(() => {
        if (settled) return;
        let empty = true;
        pipes.forEach((pipe, i) => {
          const idle = pipe.ended || (pipe.bytesRead === before[i] && !pipe.backedUp());
          if (!idle) empty = false;
          if (idle || pipe.bytesRead - (atExit[i] ?? 0) > PIPE_MAX_BYTES) through[i] = true;
        });
        const now = total();
        if (empty && now === lastLook) return finish(true);
        lastLook = now;
        if (through.every(Boolean)) {
          throughAt ??= Date.now();
          if (Date.now() - throughAt >= timing.backgroundMs) return finish(true);
        }
        timer = setTimeout(look, timing.quietMs);
      });
    };
    timer = setTimeout(look, timing.quietMs);
  });
}
