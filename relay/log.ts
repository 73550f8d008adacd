import type { LogLevel } from './config.ts';

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 99 };

/** Values attached to a log line; anything a client chose (ids, names) goes here, never into the message. */
export type LogFields = Record<string, string | number | boolean | null | undefined>;

/**
 * The relay's logger: one JSON object per line (`time`, `level`, `msg`, then the fields), so a
 * value a client chose — a room id with a newline, a forged "level" — stays inside its string.
 * Tokens and secrets never reach it.
 */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** Longest value kept in a log field: a 16 KiB join frame cannot make a 16 KiB log line. */
const MAX_FIELD = 256;

/** Build a logger writing JSON lines at `level` and above. */
export function createLogger(level: LogLevel, write: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Logger {
  const at = (lvl: Exclude<LogLevel, 'silent'>) => (message: string, fields?: LogFields) => {
    if (ORDER[lvl] < ORDER[level]) return;
    const line: Record<string, unknown> = { time: new Date().toISOString(), level: lvl, msg: message };
    if (fields) {
      for (const [key, value] of Object.entries(fields)) {
        if (value === undefined || key === 'time' || key === 'level' || key === 'msg') continue;
        line[key] = typeof value === 'string' && value.length > MAX_FIELD ? `${value.slice(0, MAX_FIELD)}…` : value;
      }
    }
    write(JSON.stringify(line));
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
