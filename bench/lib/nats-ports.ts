/**
 * The ports a nats-server chose itself. Given -1 (`-p -1`, `listen: host:-1`, `http: host:-1`)
 * it binds a random free port and logs it; a port picked free beforehand (freePort) can be taken
 * by another process before nats-server binds it, which failed runs with EADDRINUSE.
 */
export interface NatsPorts {
  /** Client connections: "Listening for client connections on 127.0.0.1:<port>". */
  client?: number;
  /** The HTTP monitor: "Starting http monitor on 127.0.0.1:<port>". */
  monitor?: number;
}

const CLIENT_PORT = /Listening for client connections on \S+:(\d+)/;
const MONITOR_PORT = /Starting http monitor on \S+:(\d+)/;

/** The ports nats-server's log has told so far. */
export function natsPorts(log: string): NatsPorts {
  const client = CLIENT_PORT.exec(log)?.[1];
  const monitor = MONITOR_PORT.exec(log)?.[1];
  return {
    ...(client === undefined ? {} : { client: Number(client) }),
    ...(monitor === undefined ? {} : { monitor: Number(monitor) }),
  };
}
