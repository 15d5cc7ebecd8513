/** forwardStep: each transition of "progress before the result, nothing after", one by one. */
import { describe, expect, it } from 'vitest';
import {
  type ForwardEvent,
  type ForwardState,
  forwardStep,
  forwardsUpdates,
  INITIAL_FORWARD_STATE,
} from '../../src/mcp/forward-state.js';
import { BridgeError } from '../../src/shared/errors.js';

const update = (progress: number): ForwardEvent => ({
  type: 'update',
  params: { progressToken: 't', progress },
});
const doneEvent: ForwardEvent = { type: 'done', params: { progressToken: 't', status: 'ok' } };
const lostError = new BridgeError('gateway_lost', 'the daemon went away');

/** The state after `events` from the start, and the effects of the last one. */
function stateAfter(...events: ForwardEvent[]) {
  let state: ForwardState = INITIAL_FORWARD_STATE;
  let effects: readonly unknown[] = [];
  for (const event of events) ({ state, effects } = forwardStep(state, event));
  return { state, effects };
}

const ENDINGS: Array<[string, ForwardEvent[]]> = [
  ['done', [doneEvent]],
  ['lost', [{ type: 'lost', error: lostError }]],
  ['a failed send', [{ type: 'sendFailed' }]],
  ['a cancel', [{ type: 'cancel' }]],
  ['stop', [{ type: 'stop' }]],
];

describe('forwardStep', () => {
  it('forwarding + update: forwards it and changes no state', () => {
    const { state, effects } = stateAfter(update(1), update(2));
    expect(effects).toEqual([{ type: 'forward', params: { progressToken: 't', progress: 2 } }]);
    expect(state).toBe(INITIAL_FORWARD_STATE);
    expect(forwardsUpdates(state)).toBe(true);
  });

  it.each(ENDINGS)('after %s an update is not forwarded', (_, ending) => {
    const before = stateAfter(...ending).state;
    const { state, effects } = stateAfter(...ending, update(9));
    expect(effects).toEqual([]);
    expect(state).toEqual(before);
    expect(state.phase).not.toBe('forwarding');
    expect(forwardsUpdates(state)).toBe(false);
  });

  it.each(ENDINGS)('after %s a done is ignored: forwarding ends once', (_, ending) => {
    const before = stateAfter(...ending).state;
    const { state, effects } = stateAfter(...ending, doneEvent);
    expect(effects).toEqual([]);
    expect(state).toEqual(before);
  });

  it('forwarding + done: ends with done and drains; the result waits for drained', () => {
    const { state, effects } = stateAfter(update(1), doneEvent);
    expect(effects).toEqual([{ type: 'announceEnd', end: 'done' }, { type: 'drain' }]);
    expect(state).toMatchObject({ phase: 'draining', end: 'done', doneParams: { status: 'ok' } });
  });

  it('draining + drained after done: settles with the done params', () => {
    const { state, effects } = stateAfter(doneEvent, { type: 'drained' });
    expect(effects).toEqual([{ type: 'settle', doneParams: { progressToken: 't', status: 'ok' } }]);
    expect(state.phase).toBe('drained');
  });

  it('forwarding + lost: ends with lost, keeps the error, drains, settles without done', () => {
    const lost = stateAfter({ type: 'lost', error: lostError });
    expect(lost.effects).toEqual([{ type: 'announceEnd', end: 'lost' }, { type: 'drain' }]);
    expect(lost.state).toMatchObject({ phase: 'draining', end: 'lost', error: lostError });
    const drained = stateAfter({ type: 'lost', error: lostError }, { type: 'drained' });
    expect(drained.effects).toEqual([{ type: 'settle', doneParams: undefined }]);
  });

  it('forwarding + sendFailed: ends with failed and stops by itself (releases, then drains): done settles without a stop()', () => {
    const { state, effects } = stateAfter({ type: 'sendFailed' });
    expect(effects).toEqual([
      { type: 'announceEnd', end: 'failed' },
      { type: 'stopListeningForCancel' },
      { type: 'release' },
    ]);
    expect(state).toMatchObject({ phase: 'ended', end: 'failed', stop: 'releasing' });
    const released = stateAfter({ type: 'sendFailed' }, { type: 'released' });
    expect(released.effects).toEqual([{ type: 'drain' }]);
    const drained = stateAfter({ type: 'sendFailed' }, { type: 'released' }, { type: 'drained' });
    expect(drained.effects).toEqual([
      { type: 'settle', doneParams: undefined },
      { type: 'stopComplete' },
    ]);
    // The caller's stop() after it adds nothing: it resolves with the stop under way.
    expect(forwardStep(state, { type: 'stop' }).effects).toEqual([]);
  });

  it('forwarding + stop: ends with stopped, stops listening for a cancel, releases', () => {
    const { state, effects } = stateAfter({ type: 'stop' });
    expect(effects).toEqual([
      { type: 'announceEnd', end: 'stopped' },
      { type: 'stopListeningForCancel' },
      { type: 'release' },
    ]);
    expect(state).toMatchObject({ phase: 'ended', stop: 'releasing' });
  });

  it('ended + released: drains; drained then settles without done and completes the stop', () => {
    const released = stateAfter({ type: 'stop' }, { type: 'released' });
    expect(released.effects).toEqual([{ type: 'drain' }]);
    expect(released.state).toMatchObject({ phase: 'draining', stop: 'released' });
    const drained = stateAfter({ type: 'stop' }, { type: 'released' }, { type: 'drained' });
    expect(drained.effects).toEqual([
      { type: 'settle', doneParams: undefined },
      { type: 'stopComplete' },
    ]);
  });

  it('stop while draining after done: releases, and both orders of released and drained complete once', () => {
    const during = stateAfter(doneEvent, { type: 'stop' });
    expect(during.effects).toEqual([{ type: 'stopListeningForCancel' }, { type: 'release' }]);
    const releasedFirst = stateAfter(doneEvent, { type: 'stop' }, { type: 'released' });
    expect(releasedFirst.effects).toEqual([]);
    expect(
      stateAfter(doneEvent, { type: 'stop' }, { type: 'released' }, { type: 'drained' }).effects,
    ).toEqual([{ type: 'settle', doneParams: doneEvent.params }, { type: 'stopComplete' }]);
    expect(
      stateAfter(doneEvent, { type: 'stop' }, { type: 'drained' }, { type: 'released' }).effects,
    ).toEqual([{ type: 'stopComplete' }]);
  });

  it('a second stop changes nothing (stop is idempotent)', () => {
    const once = stateAfter({ type: 'stop' });
    const twice = forwardStep(once.state, { type: 'stop' });
    expect(twice).toEqual({ state: once.state, effects: [] });
  });

  it('forwarding + cancel: ends with aborted and tells the worker, then stops once told', () => {
    const cancelled = stateAfter({ type: 'cancel' });
    expect(cancelled.effects).toEqual([
      { type: 'announceEnd', end: 'aborted' },
      { type: 'tellWorker' },
    ]);
    expect(cancelled.state).toMatchObject({ phase: 'ended', end: 'aborted', stop: 'cancelling' });
    const told = stateAfter({ type: 'cancel' }, { type: 'workerTold' });
    // Forwarding already ended (aborted): the stop does not announce another end.
    expect(told.effects).toEqual([{ type: 'stopListeningForCancel' }, { type: 'release' }]);
    expect(told.state).toMatchObject({ end: 'aborted', stop: 'releasing' });
  });

  it('a cancel after done still tells the worker, without another end', () => {
    const { state, effects } = stateAfter(doneEvent, { type: 'cancel' });
    expect(effects).toEqual([{ type: 'tellWorker' }]);
    expect(state).toMatchObject({ end: 'done', phase: 'draining', stop: 'cancelling' });
  });

  it('stop while telling the worker releases at once; workerTold after it changes nothing', () => {
    const stopped = stateAfter({ type: 'cancel' }, { type: 'stop' });
    expect(stopped.effects).toEqual([{ type: 'stopListeningForCancel' }, { type: 'release' }]);
    const told = forwardStep(stopped.state, { type: 'workerTold' });
    expect(told).toEqual({ state: stopped.state, effects: [] });
  });

  it('a cancel once stop began, or a second cancel, changes nothing', () => {
    for (const events of [[{ type: 'stop' }], [{ type: 'cancel' }]] as ForwardEvent[][]) {
      const before = stateAfter(...events).state;
      expect(forwardStep(before, { type: 'cancel' })).toEqual({ state: before, effects: [] });
    }
  });

  it('released or drained out of turn changes nothing', () => {
    for (const event of [{ type: 'released' }, { type: 'drained' }] as ForwardEvent[]) {
      expect(forwardStep(INITIAL_FORWARD_STATE, event)).toEqual({
        state: INITIAL_FORWARD_STATE,
        effects: [],
      });
    }
    // A failed send drains only once released: a drained event before settles nothing.
    const failed = stateAfter({ type: 'sendFailed' }).state;
    expect(forwardStep(failed, { type: 'drained' }).effects).toEqual([]);
  });
});
