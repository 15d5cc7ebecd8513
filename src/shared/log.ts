/** One line per lifecycle event on stderr; quiet at steady state unless asked. */

export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Logger {
  error(message: string): void;
  warn(message: string): void;
  info(message: string): void;
  debug(message: string): void;
}

export function createLogger(
  level: LogLevel,
  write: (line: string) => void = (line) => process.stderr.write(line),
): Logger {
  const rank = LOG_LEVELS.indexOf(level);
  const at =
    (name: LogLevel) =>
    (message: string): void => {
      if (LOG_LEVELS.indexOf(name) <= rank) write(`mcp-progress ${name}: ${message}\n`);
    };
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

export const silentLogger: Logger = { error() {}, warn() {}, info() {}, debug() {} };
