// The slice of node-ipc 14 that the ingress adapter uses. node-ipc ships no types.
declare module 'node-ipc' {
  import type { Server as NetServer, Socket } from 'node:net';

  export interface IpcConfig {
    appspace: string;
    socketRoot: string;
    id: string;
    parser: string | (new (config: IpcConfig) => unknown);
    unlink: boolean;
    delimiter: string;
    maxMessageSize: number;
    maxPendingBytes: number;
    maxEventNameLength: number;
    messageTimeout: number;
    maxConnections: number;
    silent: boolean;
    readableAll: boolean;
    writableAll: boolean;
    secureSocketRoot: boolean;
    [key: string]: unknown;
  }

  export interface IpcSocketServer {
    /** The underlying net.Server once start() has run. */
    server: NetServer | false;
    start(): void;
    on(type: string, handler: (...args: never[]) => void): IpcSocketServer;
    emit(socket: Socket, type: string, data: unknown): boolean;
  }

  export class IPCModule {
    config: IpcConfig;
    server: IpcSocketServer | false;
    serve(path: string, callback?: () => void): void;
  }

  export class IPCProtocolError extends Error {
    code: string;
  }

  export class GuardedParser {
    constructor(config: IpcConfig);
    profile: string;
    maxMessageSize: number;
    encode(type: string, data: unknown): string;
    read(buffer: string, data: string, receive: (message: unknown) => void): string;
    /** JSON.parse plus the envelope checks (object, type name); throws IPCProtocolError. */
    decodeMessage(frame: string): unknown;
    assertFrameSize(characters: number, bytes: number): void;
  }

  const singleton: IPCModule;
  export default singleton;
}
