/**
 * Why a NATS server in operator mode refused a `--nats-creds` file. The server says only
 * "Authorization Violation"; the file itself tells an expired or not yet valid user JWT from
 * one the server does not trust, so the warning can say which and what to do.
 */

/** The claims of the user JWT in a creds file that say when it is valid (seconds since the epoch). */
interface ValidDates {
  readonly exp?: number;
  readonly nbf?: number;
}

const JWT_BLOCK =
  /-----BEGIN NATS USER JWT-----\s*([A-Za-z0-9_\-.]+)\s*------END NATS USER JWT------/;

/** The validity claims of the creds file's user JWT, or undefined when it holds none readable. */
export function userJwtDates(creds: string): ValidDates | undefined {
  const jwt = JWT_BLOCK.exec(creds)?.[1];
  const payload = jwt?.split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (typeof claims !== 'object' || claims === null) return undefined;
    const { exp, nbf } = claims as Record<string, unknown>;
    return {
      ...(typeof exp === 'number' ? { exp } : {}),
      ...(typeof nbf === 'number' ? { nbf } : {}),
    };
  } catch {
    return undefined;
  }
}

/** What to tell the user when the server refused the credentials of `file` (its text `creds`). */
export function credsRefusal(file: string, creds: string, nowMs: number): string {
  const dates = userJwtDates(creds);
  const at = (seconds: number) => new Date(seconds * 1000).toISOString();
  if (dates === undefined) {
    return `--nats-creds ${file} holds no readable user JWT: give the file nsc or your operator made for this user`;
  }
  if (dates.exp !== undefined && dates.exp * 1000 <= nowMs) {
    return `the user JWT in --nats-creds ${file} expired at ${at(dates.exp)}: mint a new creds file for this user (nsc generate creds) and restart the daemon`;
  }
  if (dates.nbf !== undefined && dates.nbf * 1000 > nowMs) {
    return `the user JWT in --nats-creds ${file} is not valid before ${at(dates.nbf)}: check this machine's clock or mint a creds file valid now`;
  }
  return `the server refused the credentials in --nats-creds ${file}: check that its user is signed by an account the server trusts (its operator and resolver) and is not revoked`;
}
