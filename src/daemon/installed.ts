/**
 * Packages the daemon loads at first use (node-ipc at the first worker, ws at the first
 * upgrade) are looked for at start instead, so that a broken install fails the start with a
 * clear error, not a session or a worker later.
 */
import { createRequire } from 'node:module';
import { BridgeError } from '../shared/errors.js';

/** start_failed naming `name` when it cannot be found; undefined when it is installed. */
export function missingPackage(name: string): BridgeError | undefined {
  try {
    createRequire(import.meta.url).resolve(name);
    return undefined;
  } catch (error) {
    return new BridgeError(
      'start_failed',
      `cannot find ${name} (reinstall mcp-progress-bridge): ${(error as Error).message}`,
      { cause: error },
    );
  }
}
