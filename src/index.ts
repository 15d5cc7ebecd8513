/** The library: run a daemon in-process, talk to one as a gateway, and the protocol v1 types. */

export { Daemon } from './daemon/daemon.js';
export type { LocalProgressSource } from './daemon/in-process-source.js';
export {
  type DaemonOptions,
  type DaemonOptionsInput,
  DEFAULTS,
  resolveDaemonOptions,
} from './daemon/options.js';
export {
  GatewayClient,
  type GatewayClientOptions,
  GatewayRpcError,
} from './gateway-client/gateway-client.js';
export * from './protocol/index.js';
export {
  BridgeError,
  type BridgeErrorCode,
  LOCAL_ERRORS,
  type LocalErrorCode,
} from './shared/errors.js';
export * from './shared/locate.js';
