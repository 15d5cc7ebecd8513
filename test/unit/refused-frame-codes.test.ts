/**
 * REFUSED_FRAME_CODES, the refusals that condemn a frame for good (not sent again; a done waiting
 * on that connection fails), is one set in three clients: the Node client's is the reference, and
 * the Python and C clients' copies are read from the real interpreter and the real compiled
 * header, so that they cannot drift from it.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REFUSED_FRAME_CODES } from '../../src/client/done-answers.js';
import { REJECT_CODES } from '../../src/protocol/errors.js';
import { buildCProgram, cc } from '../helpers/c-client.js';
import { cleanupAll, ROOT, tempDir } from '../helpers/daemon.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';

const NODE = [...REFUSED_FRAME_CODES].sort();

describe('REFUSED_FRAME_CODES', () => {
  afterAll(cleanupAll);

  it('is the framing errors but a full daemon and a stalled frame, in the Node client', () => {
    // A guard on the reference itself: the comparisons below are only as good as it is.
    expect(NODE).toEqual([
      'frame_too_large',
      'invalid_envelope',
      'invalid_json',
      'invalid_utf8',
      'reserved_event',
    ]);
  });

  it('is the same set in the Python client', () => {
    const printed = execFileSync(
      PYTHON,
      [
        ...PYTHON_ARGS,
        // No __pycache__ left beside the client.
        '-B',
        '-c',
        'import json, sys; sys.path.insert(0, sys.argv[1]); import mcp_progress; print(json.dumps(sorted(mcp_progress.REFUSED_FRAME_CODES)))',
        join(ROOT, 'clients/python'),
      ],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(printed)).toEqual(NODE);
  });

  it.skipIf(cc.skip)('is the same set in the C client, of every code the daemon sends', () => {
    cc.require();
    const program = buildCProgram('cc', tempDir(), 'c_refused_codes');
    // Every reject code, and one no daemon sends: the C client's set is compared whole.
    const candidates = [...Object.keys(REJECT_CODES), 'no_such_code'];
    const printed = execFileSync(program, candidates, { encoding: 'utf8' });
    expect(printed.split('\n').filter(Boolean).sort()).toEqual(NODE);
  });
});
