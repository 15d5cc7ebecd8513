import { afterAll, beforeAll } from 'vitest';
import { cleanupAll, type RunningDaemon, startDaemon } from './daemon.js';

/**
 * One daemon for all the tests of a file: started before the first, stopped (and every
 * temporary directory removed) after the last. The handle reads through to the daemon
 * once it runs, so a file can hold it in a `const` at the top.
 */
export function daemonForFile(args: string[] = []): RunningDaemon {
  let started: RunningDaemon | undefined;
  const current = (): RunningDaemon => {
    if (started === undefined) throw new Error("the file's daemon was used before beforeAll ran");
    return started;
  };
  beforeAll(async () => {
    started = await startDaemon(args);
  });
  afterAll(async () => {
    await started?.stop();
    cleanupAll();
  });
  return {
    get runtimeDir() {
      return current().runtimeDir;
    },
    get info() {
      return current().info;
    },
    get child() {
      return current().child;
    },
    stderr: () => current().stderr(),
    stop: (signal) => current().stop(signal),
  };
}
