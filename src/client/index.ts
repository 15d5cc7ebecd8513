/**
 * mcp-progress-bridge/client: the publisher for Node workers. It speaks the
 * worker socket only; it imports neither ws, the MCP SDK nor node-ipc.
 */

export type { DoneStatus, ProgressToken } from '../protocol/frames.js';
export { BridgeError } from '../shared/errors.js';
export {
  type CancelCallback,
  connectPublisher,
  type DoneOutcome,
  type ProgressUpdate,
  type Publisher,
  type PublisherOptions,
} from './publisher.js';
