/**
 * "Progress before the result, nothing after" as a state machine: the states
 * of one forwarding (forwardProgress), the events that move it and what each
 * move asks to be done. Pure: `forwardStep` takes a state and an event and
 * returns the next state with its effects; forward.ts carries the effects out
 * and feeds their completions (released, workerTold, drained) back in.
 *
 * Two lines run side by side:
 * - the phase: forwarding -> ended -> draining -> drained. Updates go out only
 *   while forwarding; the drain (every update handed over, the client pinged
 *   at most once, RESULT_GAP_MS kept) runs once, started by done or lost, or
 *   by stop (or a failed send, which stops) once the subscription is released;
 *   at drained the result may follow.
 * - the stop: none -> (cancelling ->) releasing -> released. A cancel tells the
 *   worker first, then stops; stop() resolves once released and drained.
 */
import type { DoneParams, ProgressParams } from '../protocol/frames.js';
import type { BridgeError } from '../shared/errors.js';

/**
 * 'lost': the subscription ended without done, its BridgeError in `error`: the daemon went away
 * and did not come back (gateway_lost), or the one that came back refused the resubscribe.
 */
export type ForwardEnd = 'done' | 'stopped' | 'failed' | 'aborted' | 'lost';

export type ForwardPhase = 'forwarding' | 'ended' | 'draining' | 'drained';

export type StopPhase = 'none' | 'cancelling' | 'releasing' | 'released';

export interface ForwardState {
  readonly phase: ForwardPhase;
  readonly stop: StopPhase;
  /** Why forwarding ended; undefined while forwarding. */
  readonly end: ForwardEnd | undefined;
  readonly doneParams: DoneParams | undefined;
  readonly error: BridgeError | undefined;
}

export type ForwardEvent =
  | { readonly type: 'update'; readonly params: ProgressParams }
  | { readonly type: 'done'; readonly params: DoneParams }
  | { readonly type: 'lost'; readonly error: BridgeError }
  /** A send to the client failed: nobody is listening any more. */
  | { readonly type: 'sendFailed' }
  /** The client cancelled the request. */
  | { readonly type: 'cancel' }
  /** The worker was told of the cancel (or telling it failed). */
  | { readonly type: 'workerTold' }
  | { readonly type: 'stop' }
  /** The subscription was released (or releasing it failed). */
  | { readonly type: 'released' }
  | { readonly type: 'drained' };

export type ForwardEffect =
  | { readonly type: 'forward'; readonly params: ProgressParams }
  /** Settle `ended` with this reason (once: the phase leaves forwarding once). */
  | { readonly type: 'announceEnd'; readonly end: ForwardEnd }
  | { readonly type: 'tellWorker' }
  | { readonly type: 'stopListeningForCancel' }
  | { readonly type: 'release' }
  | { readonly type: 'drain' }
  /** Settle `done`: with the done params when the stream ended with done, else undefined. */
  | { readonly type: 'settle'; readonly doneParams: DoneParams | undefined }
  /** Resolve stop(): released and drained, the result may follow. */
  | { readonly type: 'stopComplete' };

export const INITIAL_FORWARD_STATE: ForwardState = {
  phase: 'forwarding',
  stop: 'none',
  end: undefined,
  doneParams: undefined,
  error: undefined,
};

export interface ForwardStep {
  readonly state: ForwardState;
  readonly effects: readonly ForwardEffect[];
}

const unchanged = (state: ForwardState): ForwardStep => ({ state, effects: [] });

/**
 * Whether an update arriving in `state` is forwarded: only while forwarding. An update never
 * changes the state, so forward.ts may apply this rule to an update without a step of its own.
 */
export function forwardsUpdates(state: ForwardState): boolean {
  return state.phase === 'forwarding';
}

/** The one transition function: what `event` does in `state`. */
export function forwardStep(state: ForwardState, event: ForwardEvent): ForwardStep {
  switch (event.type) {
    case 'update':
      if (!forwardsUpdates(state)) return unchanged(state);
      return { state, effects: [{ type: 'forward', params: event.params }] };
    case 'done':
      if (state.phase !== 'forwarding') return unchanged(state);
      // The result waits for the drain: done settles at drained.
      return {
        state: { ...state, phase: 'draining', end: 'done', doneParams: event.params },
        effects: [{ type: 'announceEnd', end: 'done' }, { type: 'drain' }],
      };
    case 'lost':
      if (state.phase !== 'forwarding') return unchanged(state);
      return {
        state: { ...state, phase: 'draining', end: 'lost', error: event.error },
        effects: [{ type: 'announceEnd', end: 'lost' }, { type: 'drain' }],
      };
    case 'sendFailed':
      if (state.phase !== 'forwarding') return unchanged(state);
      // Nobody listens any more: it stops as stop() would (release, then drain), so `done`
      // settles even for a caller that only awaits it, and the subscription is not held.
      return beginStop(state, 'failed');
    case 'cancel': {
      // Once stop began, the cancel listener is gone: a late cancel changes nothing.
      if (state.stop !== 'none') return unchanged(state);
      const ending = endNow(state, 'aborted');
      return {
        state: { ...ending.state, stop: 'cancelling' },
        effects: [...ending.effects, { type: 'tellWorker' }],
      };
    }
    case 'workerTold':
      if (state.stop !== 'cancelling') return unchanged(state);
      return beginStop(state);
    case 'stop':
      if (state.stop !== 'none' && state.stop !== 'cancelling') return unchanged(state);
      return beginStop(state);
    case 'released': {
      if (state.stop !== 'releasing') return unchanged(state);
      const released: ForwardState = { ...state, stop: 'released' };
      if (state.phase === 'ended') {
        return { state: { ...released, phase: 'draining' }, effects: [{ type: 'drain' }] };
      }
      if (state.phase === 'drained')
        return { state: released, effects: [{ type: 'stopComplete' }] };
      return unchanged(released);
    }
    case 'drained': {
      if (state.phase !== 'draining') return unchanged(state);
      const effects: ForwardEffect[] = [
        { type: 'settle', doneParams: state.end === 'done' ? state.doneParams : undefined },
      ];
      if (state.stop === 'released') effects.push({ type: 'stopComplete' });
      return { state: { ...state, phase: 'drained' }, effects };
    }
  }
}

/** Leaves forwarding (if still there) for `end`: nothing is forwarded after. */
function endNow(state: ForwardState, end: ForwardEnd): ForwardStep {
  if (state.phase !== 'forwarding') return unchanged(state);
  return {
    state: { ...state, phase: 'ended', end },
    effects: [{ type: 'announceEnd', end }],
  };
}

/** Stop: end forwarding, stop listening for a cancel, release the subscription. */
function beginStop(state: ForwardState, end: ForwardEnd = 'stopped'): ForwardStep {
  const ending = endNow(state, end);
  return {
    state: { ...ending.state, stop: 'releasing' },
    effects: [...ending.effects, { type: 'stopListeningForCancel' }, { type: 'release' }],
  };
}
