/**
 * A gateway method that throws (a bug in the daemon) fails its request only: the reply is
 * internal_error with the request's id (JSON-RPC 2.0 §5), a notification gets none (§4.1), and
 * the failure is reported. The daemon's own methods do not throw on any input a session can send,
 * so the backend here is one that fails: it is code inside the process, not a user boundary.
 */
import { describe, expect, it } from 'vitest';
import { type GatewayBackend, handleRpcText, RPC_METHODS } from '../../src/daemon/rpc.js';

function broke(name: string): () => never {
  return () => {
    throw new Error(`${name} broke`);
  };
}

const BROKEN: GatewayBackend = {
  subscribe: broke('subscribe'),
  unsubscribe: broke('unsubscribe'),
  subscribeAll: broke('subscribeAll'),
  unsubscribeAll: broke('unsubscribeAll'),
  list: broke('list'),
  listReplyBytes: broke('listReplyBytes'),
  listEpoch: 'epochA',
  positionsIssued: broke('positionsIssued'),
  get: broke('get'),
  cancel: broke('cancel'),
  status: broke('status'),
  createTask: broke('createTask'),
  getTask: broke('getTask'),
  cancelTask: broke('cancelTask'),
  listTasks: broke('listTasks'),
};

/** Valid params for each method, so that its run (and so the backend) is reached. */
const PARAMS: Record<string, unknown> = {
  'progress/subscribe': { progressToken: 'job' },
  'progress/unsubscribe': { progressToken: 'job' },
  'progress/subscribeAll': {},
  'progress/unsubscribeAll': {},
  'progress/list': {},
  'progress/get': { progressToken: 'job' },
  'progress/cancel': { progressToken: 'job' },
  'progress/status': {},
  'task/create': { progressToken: 'job' },
  'task/get': { taskId: 'task-1' },
  'task/cancel': { taskId: 'task-1' },
  'task/list': {},
};

function handle(text: string): { reply: string | undefined; failures: string[] } {
  const failures: string[] = [];
  const reply = handleRpcText(1, text, BROKEN, (message) => failures.push(message));
  return { reply, failures };
}

describe('a gateway method that throws', () => {
  it('has params here for every method', () => {
    expect(Object.keys(PARAMS).sort()).toEqual([...RPC_METHODS].sort());
  });

  it.each(RPC_METHODS)(
    '%s: internal_error with the request id, and the failure reported',
    (method) => {
      const { reply, failures } = handle(
        JSON.stringify({ jsonrpc: '2.0', id: `req-${method}`, method, params: PARAMS[method] }),
      );
      expect(JSON.parse(reply ?? 'null')).toEqual({
        jsonrpc: '2.0',
        id: `req-${method}`,
        error: {
          code: -32603,
          message: expect.stringMatching(/^the daemon failed on this request: \w+ broke$/),
          data: { code: 'internal_error' },
        },
      });
      expect(failures).toEqual([expect.stringMatching(/^\w+ broke$/)]);
    },
  );

  it.each([7, 0, -1.5, null, ''])('echoes the id %j', (id) => {
    const { reply } = handle(JSON.stringify({ jsonrpc: '2.0', id, method: 'progress/status' }));
    expect(JSON.parse(reply ?? 'null')).toMatchObject({
      id,
      error: { data: { code: 'internal_error' } },
    });
  });

  it('echoes a numeric id a double cannot hold as it was written', () => {
    const { reply } = handle('{"jsonrpc":"2.0","id":1e999,"method":"progress/status"}');
    expect(reply).toMatch(/^\{"jsonrpc":"2\.0","id":1e999,"error":\{"code":-32603,/);
  });

  it('answers a notification with nothing, and still reports the failure', () => {
    const { reply, failures } = handle(
      JSON.stringify({ jsonrpc: '2.0', method: 'progress/status' }),
    );
    expect(reply).toBeUndefined();
    expect(failures).toEqual(['status broke']);
  });

  it('reports a thrown non-Error as an Error with its text', () => {
    const backend: GatewayBackend = {
      ...BROKEN,
      status: () => {
        throw 'not an Error';
      },
    };
    const failures: string[] = [];
    const reply = handleRpcText(
      1,
      '{"jsonrpc":"2.0","id":"s","method":"progress/status"}',
      backend,
      (message) => failures.push(message),
    );
    expect(JSON.parse(reply ?? 'null')).toMatchObject({
      id: 's',
      error: { message: 'the daemon failed on this request: not an Error' },
    });
    expect(failures).toEqual(['not an Error']);
  });
});
