/**
 * RecoveringProgressSource passes on the daemon's notice of each task cancelled in it (an
 * embedded daemon's), from whichever source is current: after a recovery, the new one's.
 * Stand-in sources; the real embedded daemon is test/e2e/task-listen-sdk.test.ts's.
 */
import { describe, expect, it } from 'vitest';
import { type ProgressSource, RecoveringProgressSource } from '../../src/mcp/progress-source.js';
import type { TaskRecord } from '../../src/protocol/tasks.js';

/** A source whose daemon tells of cancels (in this process), and that can go away. */
function embedded(name: string) {
  const listeners = new Set<(task: TaskRecord) => void>();
  let lost = false;
  const unused = () => Promise.reject(new Error('not used here'));
  const source: ProgressSource = {
    get lost() {
      return lost;
    },
    onTaskCancelled: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    openSession: unused,
    list: async () => ({ streams: [] }),
    get: unused,
    cancel: unused,
    createTask: unused,
    getTask: unused,
    cancelTask: unused,
    listTasks: unused,
    close: async () => {},
  };
  return {
    source,
    listeners,
    lose: () => {
      lost = true;
    },
    cancel: (taskId: string) => {
      for (const listener of listeners) listener({ taskId, progressToken: name } as TaskRecord);
    },
  };
}

describe('RecoveringProgressSource and the notice of tasks cancelled', () => {
  it('hears the current daemon, then the next one after a recovery (not the lost one), and lets go when no one listens', async () => {
    const first = embedded('first');
    const second = embedded('second');
    const next = [first, second];
    const recovering = new RecoveringProgressSource(async () => {
      const one = next.shift();
      if (one === undefined) throw new Error('no more sources');
      return one.source;
    });
    await recovering.list();
    const heard: string[] = [];
    const stop = recovering.onTaskCancelled((task) => heard.push(task.taskId));
    first.cancel('a');
    expect(heard).toEqual(['a']);
    first.lose();
    // The next call finds the source lost and establishes the next.
    await recovering.list();
    expect(first.listeners.size).toBe(0);
    second.cancel('b');
    expect(heard).toEqual(['a', 'b']);
    stop();
    expect(second.listeners.size).toBe(0);
    second.cancel('c');
    expect(heard).toEqual(['a', 'b']);
    await recovering.close();
  });
});
