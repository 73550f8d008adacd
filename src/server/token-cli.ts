import { readFileSync } from 'node:fs';
import { GRANT_FLAGS, SOURCES, type Grant, type GrantFlag, type Source } from '../protocol/grant.ts';
import { loadOrCreateDevKeys } from './dev-keys.ts';

type Keys = { keys: Record<string, string>; revoked: string[] };

/** Every key and revocation of a keys file, flat or grouped by project. */
function keysOf(data: unknown): Keys {
  const one = (d: { keys?: Record<string, string>; revoked?: string[] } | undefined): Keys => ({ keys: { ...(d?.keys ?? {}) }, revoked: [...(d?.revoked ?? [])] });
  const file = data as { projects?: Record<string, { keys?: Record<string, string>; revoked?: string[] }> } & Parameters<typeof one>[0];
  if (!file?.projects) return one(file);
  return Object.values(file.projects).map(one).reduce((all, p) => ({ keys: { ...all.keys, ...p.keys }, revoked: [...all.revoked, ...p.revoked] }), { keys: {}, revoked: [] });
}
import { mintToken } from './mint.ts';

const HELP = `Usage: tessera token [options]

Prints an access token, signed with the dev-mode key of \`tessera-relay\` (or a keys file).

  --room ID             the room (omit for a domain-wide token)
  --identity ID         pin the participant id
  --grant FLAGS         comma-separated: ${GRANT_FLAGS.join(', ')}
  --sources LIST        canPublishSources: ${SOURCES.join(', ')} (default: all)
  --viewer              audience tier (isViewer)
  --ask [TTL]           wait in the lobby (joinPolicy ask; TTL in seconds)
  --ttl DURATION        lifetime: 90s, 15m, 1h, 1d (default 1h)
  --keys FILE           sign with a keys file (flat or with projects) instead of dev mode
  --key APIKEY          which key of the file (default: its first not revoked)
`;

/** `tessera token ...`: returns the exit code; the token goes to `out`. */
export function tokenCommand(argv: readonly string[], out: (s: string) => void, err: (s: string) => void): number {
  const opts: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) return fail(`unexpected ${arg}`);
    const name = arg.slice(2);
    const next = argv[i + 1];
    const boolean = name === 'viewer' || name === 'help' || (name === 'ask' && (next === undefined || next.startsWith('--')));
    if (boolean) opts[name] = true;
    else if (next === undefined) return fail(`--${name} needs a value`);
    else opts[name] = argv[++i]!;
  }
  if (opts.help) {
    out(HELP);
    return 0;
  }
  function fail(message: string): number {
    err(`tessera token: ${message}\n${HELP}`);
    return 2;
  }
  const known = new Set(['room', 'identity', 'grant', 'sources', 'viewer', 'ask', 'ttl', 'keys', 'key']);
  for (const name of Object.keys(opts)) if (!known.has(name)) return fail(`unknown option --${name}`);
  const grant: Grant = {};
  for (const flag of typeof opts.grant === 'string' ? opts.grant.split(',').map((f) => f.trim()).filter(Boolean) : []) {
    if (!GRANT_FLAGS.includes(flag as GrantFlag)) return fail(`unknown grant flag ${flag}`);
    grant[flag as GrantFlag] = true;
  }
  if (typeof opts.sources === 'string') {
    const sources = opts.sources.split(',').map((s) => s.trim()).filter(Boolean);
    if (!sources.every((s) => SOURCES.includes(s as Source))) return fail(`sources are ${SOURCES.join(', ')}`);
    grant.canPublishSources = sources as Source[];
  }
  let apiKey: string;
  let secret: string;
  try {
    if (typeof opts.keys === 'string') {
      const file = keysOf(JSON.parse(readFileSync(opts.keys, 'utf8')));
      const usable = Object.keys(file.keys).filter((k) => !file.revoked.includes(k));
      apiKey = typeof opts.key === 'string' ? opts.key : (usable[0] ?? '');
      secret = file.keys[apiKey] ?? '';
      if (!secret) return fail(`no usable key ${apiKey ? `"${apiKey}" ` : ''}in ${opts.keys}`);
      if (file.revoked.includes(apiKey)) return fail(`key "${apiKey}" is revoked in ${opts.keys}: the relay would refuse its tokens`);
    } else ({ apiKey, secret } = loadOrCreateDevKeys());
    out(
      `${mintToken({
        apiKey,
        secret,
        grant,
        ttl: typeof opts.ttl === 'string' ? opts.ttl : '1h',
        ...(typeof opts.room === 'string' ? { roomId: opts.room } : {}),
        ...(typeof opts.identity === 'string' ? { participantId: opts.identity } : {}),
        ...(opts.viewer ? { isViewer: true } : {}),
        ...(opts.ask ? { joinPolicy: opts.ask === true ? { mode: 'ask' as const } : { mode: 'ask' as const, ttl: Number(opts.ask) } } : {}),
      })}\n`,
    );
    return 0;
  } catch (e) {
    return fail((e as Error).message);
  }
}
