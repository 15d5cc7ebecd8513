// The slice of node-ipc 14 that the ingress adapter uses. node-ipc ships no types.
// What of it node-ipc does not document is pinned by test/contract/node-ipc.test.ts.
declare module 'node-ipc' {
  import type { Server as NetServer, Socket } from 'node:net';

  export interface IpcConfig {
    silent: boolean;
    /** The raw profile: no framing; each read is published as `data` (chunk, socket). */
    rawBuffer: boolean;
    [key: string]: unknown;
  }

  export interface IpcSocketServer {
    /** The underlying net.Server once start() has run. */
    server: NetServer | false;
    start(): void;
    on(type: string, handler: (...args: never[]) => void): IpcSocketServer;
    /** Raw profile: writes the value's bytes to the socket as they are. */
    emit(socket: Socket, value: string | Buffer): boolean;
    /** Framed profiles: encodes and writes one envelope. */
    emit(socket: Socket, type: string, data: unknown): boolean;
    /** Undocumented: wires an accepted socket as node-ipc's own listener would (pinned by the contract test). */
    addSocket(socket: Socket): void;
  }

  export class IPCModule {
    config: IpcConfig;
    server: IpcSocketServer | false;
    serve(path: string, callback?: () => void): void;
  }
}
