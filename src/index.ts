/** The library: run a daemon in-process, talk to one as a gateway, and the protocol v1 types. */
export {
  type DaemonOptions,
  type DaemonOptionsInput,
  DEFAULTS,
  resolveDaemonOptions,
} from './config.js';
export { Daemon, type DaemonStatus } from './daemon.js';
export {
  GatewayClient,
  type GatewayClientOptions,
  GatewayRpcError,
} from './egress/gateway-client.js';
export * from './locate.js';
export * from './protocol/index.js';
export type {
  DoneNotification,
  Notification,
  ProgressNotification,
} from './router/notifications.js';
