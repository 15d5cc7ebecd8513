/**
 * progress/list cursors, for the gateway methods (rpc.ts) and the in-process source alike: no
 * zod here, so that the daemon's start loads none.
 */

/** A list cursor: the daemon run's epoch and a position in its stream table. Opaque to clients. */
export function listCursor(epoch: string, position: number): string {
  return `${epoch}.${position}`;
}

/**
 * The position a cursor stands for: undefined for none, or why it is refused (a string): not
 * a cursor at all, one of another daemon or an earlier run (positions restart at each start),
 * or a position this run never gave.
 */
export function cursorPosition(
  cursor: string | undefined,
  daemon: { readonly listEpoch: string; positionsIssued(): number },
): number | undefined | string {
  if (cursor === undefined) return undefined;
  const match = /^([A-Za-z0-9_-]{1,32})\.(0|[1-9][0-9]{0,15})$/.exec(cursor);
  if (match === null) return 'not a cursor of this daemon';
  if (match[1] !== daemon.listEpoch) {
    return 'a cursor of another daemon, or of this one before it restarted';
  }
  const position = Number(match[2]);
  if (!Number.isSafeInteger(position) || position >= daemon.positionsIssued()) {
    return 'a position this daemon never gave';
  }
  return position;
}

/** A task/list cursor: `t` and the creation order of the last task of the page. */
export function taskCursor(order: number): string {
  return `t${order}`;
}

/** A task/list cursor's creation order, or null when the text is not one. */
export function taskCursorPosition(cursor: string): number | null {
  const match = /^t(0|[1-9][0-9]{0,15})$/.exec(cursor);
  return match === null ? null : Number(match[1]);
}
