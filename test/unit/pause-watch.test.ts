import { describe, expect, it } from 'vitest';
import { PauseWatch } from '../../src/shared/pause-watch.js';

describe('PauseWatch', () => {
  it('sees a pause only in a gap longer than the tolerance, measured from the check before', () => {
    const watch = new PauseWatch(1000, 200);
    expect(watch.resumed(1100)).toBe(false);
    expect(watch.resumed(1300)).toBe(false); // exactly the tolerance: not a pause
    expect(watch.resumed(1501)).toBe(true);
    expect(watch.resumed(1600)).toBe(false); // the next gap counts from the late check
    expect(new PauseWatch(0, 200).resumed(201)).toBe(true); // from the start, too
  });
});
