import { backplanePermissions } from '../daemon/backplane-names.js';
import {
  DAEMON_FLAGS,
  type OptionSpec,
  optionsInput,
  resolveDaemonOptions,
} from '../daemon/options.js';
import { helpRow, type OptionRow, optionsHelp } from '../shared/option-table.js';
import { parseOptions } from './args.js';
import type { Io } from './io.js';

/** The daemon's own rows for the flags that decide its subjects: the same names, defaults and checks. */
const NAMING_FLAGS = DAEMON_FLAGS.filter((spec) =>
  ['nats-name', 'nats-prefix', 'runtime-dir'].includes(spec.name),
);

export const NATS_PERMISSIONS_OPTIONS: readonly OptionRow[] = [...NAMING_FLAGS, helpRow('Other')];

export const NATS_PERMISSIONS_HELP = `Usage: mcp-progress nats-permissions [--nats-name NAME] [--nats-prefix P]

Prints the permissions block of a nats-server user for one daemon of the
backplane (docs/BACKPLANE.md, "Security"): put it in that user's entry of the
server's authorization { users = [...] }. A user confined so may publish
values, dones and heartbeats on its own host's subjects only (another host's
cannot be forged), cancels to any host, and read every stream of the prefix.
Without --nats-name, the name the daemon would take by default here (with
the same --runtime-dir).

${optionsHelp(NATS_PERMISSIONS_OPTIONS, 27)}`;

export async function natsPermissionsCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseOptions('nats-permissions', argv, NATS_PERMISSIONS_OPTIONS);
  if (values.help) {
    io.out(NATS_PERMISSIONS_HELP);
    return 0;
  }
  const given = new Map<OptionSpec, unknown>();
  for (const spec of NAMING_FLAGS) given.set(spec, values[spec.name]);
  const options = resolveDaemonOptions(optionsInput(given));
  io.out(backplanePermissions(options.natsPrefix, options.natsName));
  return 0;
}
