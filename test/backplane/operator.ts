/**
 * NATS in operator (decentralised JWT) mode for the backplane tests: an operator, an account
 * with JetStream and users, all minted offline here with nats-jwt (nothing of nsc), and the
 * server configuration that trusts them through a memory resolver.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  createAccount,
  createOperator,
  createUser,
  encodeAccount,
  encodeOperator,
  encodeUser,
  fmtCreds,
  type KeyPair,
} from 'nats-jwt';
import { tempDir } from '../helpers/daemon.js';

export interface Operator {
  /** The nats-server configuration text (operator, resolver and the preloaded account). */
  readonly config: string;
  /** Writes a creds file for a new user of the account; `expiresAt` in ms since the epoch. */
  user(
    name: string,
    options?: { expiresAt?: number; signer?: 'account' | 'stranger' },
  ): Promise<string>;
}

/** An operator with one account that may use JetStream without limits. */
export async function mintOperator(): Promise<Operator> {
  const operatorKey = createOperator();
  const accountKey = createAccount();
  // An account of another operator: its users are signed, but by no one this server trusts.
  const strangerKey = createAccount();
  // JetStream in operator mode needs a system account.
  const systemKey = createAccount();
  const operatorJwt = await encodeOperator('bridge-tests', operatorKey, {
    system_account: systemKey.getPublicKey(),
  });
  const systemJwt = await encodeAccount('SYS', systemKey, {}, { signer: operatorKey });
  // An account's limits default to none at all (no connection, no subscription): -1 is unlimited.
  const limits = {
    conn: -1,
    subs: -1,
    data: -1,
    payload: -1,
    leaf: -1,
    imports: -1,
    exports: -1,
    wildcards: true,
    mem_storage: -1,
    disk_storage: -1,
    streams: -1,
    consumer: -1,
  };
  const accountJwt = await encodeAccount(
    'backplane',
    accountKey,
    { limits },
    { signer: operatorKey },
  );
  const dir = tempDir('nats-operator-');
  return {
    config: [
      `operator: ${operatorJwt}`,
      `system_account: ${systemKey.getPublicKey()}`,
      'resolver: MEMORY',
      'resolver_preload: {',
      `  ${systemKey.getPublicKey()}: ${systemJwt}`,
      `  ${accountKey.getPublicKey()}: ${accountJwt}`,
      '}',
      '',
    ].join('\n'),
    async user(name, options = {}) {
      const userKey: KeyPair = createUser();
      const signer = options.signer === 'stranger' ? strangerKey : accountKey;
      const jwt = await encodeUser(
        name,
        userKey,
        signer,
        {},
        options.expiresAt === undefined ? {} : { exp: Math.floor(options.expiresAt / 1000) },
      );
      const file = join(dir, `${name}.creds`);
      writeFileSync(file, fmtCreds(jwt, userKey), { mode: 0o600 });
      return file;
    },
  };
}
