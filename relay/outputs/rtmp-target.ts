/**
 * Where a livestream may go. The URL comes from a member with `canLivestream`, so the relay
 * must not become their way into its own network: the host is resolved once, every address it
 * resolves to must be public (unless `--allow-private-rtmp`), and the connection goes to the
 * address that was checked — never to the name again, which a second DNS answer could point
 * somewhere else (DNS rebinding).
 */
import { BlockList, isIP } from 'node:net';
import { lookupName, type NameAddress } from '../name-lookup.ts';

/** A parsed `rtmp://` or `rtmps://` URL. */
export interface RtmpTarget {
  secure: boolean;
  /** The host as written (a name, or an IP address without brackets). */
  host: string;
  port: number;
  app: string;
  key: string;
  /** `rtmp[s]://host[:port]/app`, as the `connect` command wants it. */
  tcUrl: string;
}

const MAX_URL = 2048;

/**
 * Split `rtmp[s]://host[:port]/app[/...]/streamKey`; `null` if it is not one. No user info, no
 * query or fragment, no spaces or control characters; the port is 1–65535 (default 1935, or
 * 443 for rtmps).
 */
export function parseRtmpUrl(url: string): RtmpTarget | null {
  if (url.length > MAX_URL || /[\s\u0000-\u001f\u007f?#@\\]/.test(url)) return null;
  const m = /^(rtmps?):\/\/(\[[0-9a-fA-F:.]+\]|[^/:[\]]+)(?::(\d{1,5}))?\/(.+)\/([^/]+)$/.exec(url);
  if (!m) return null;
  const [, scheme, hostPart, portText, app, key] = m as unknown as [string, string, string, string | undefined, string, string];
  const host = hostPart.startsWith('[') ? hostPart.slice(1, -1) : hostPart;
  if (hostPart.startsWith('[') && isIP(host) !== 6) return null;
  const secure = scheme === 'rtmps';
  const port = portText ? Number(portText) : secure ? 443 : 1935;
  if (port < 1 || port > 65535) return null;
  return { secure, host, port, app, key, tcUrl: `${scheme}://${hostPart}${portText ? `:${portText}` : ''}/${app}` };
}

// Not reachable from the public internet, or not one host: loopback, private, shared (CGNAT),
// link-local (cloud metadata at 169.254.169.254), unspecified, multicast, broadcast, reserved.
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
// Teredo (2001::/32) and the local-use NAT64 prefix (64:ff9b:1::/48) tunnel to addresses the relay cannot check
for (const [net, prefix] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['2001::', 32], ['64:ff9b:1::', 48],
] as const) blocked.addSubnet(net, prefix, 'ipv6');

/** The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if any. */
function embeddedIpv4(address: string): string | null {
  const words = expandIpv6(address);
  if (!words) return null;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zeros = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  if (zeros(0, 5) && (words[5] === 0xffff || words[5] === 0)) return v4(words[6]!, words[7]!); // ::ffff:a.b.c.d, ::a.b.c.d
  if (zeros(0, 4) && words[4] === 0xffff && words[5] === 0) return v4(words[6]!, words[7]!); // ::ffff:0:a.b.c.d (IPv4-translated)
  if (words[0] === 0x64 && words[1] === 0xff9b && zeros(2, 6)) return v4(words[6]!, words[7]!); // 64:ff9b::/96
  if (words[0] === 0x2002) return v4(words[1]!, words[2]!); // 2002:aabb:ccdd::/48
  return null;
}

/** The eight 16-bit words of an IPv6 address, or `null`. */
function expandIpv6(address: string): number[] | null {
  let text = address.toLowerCase();
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const part = (s: string) => (s ? s.split(':').map((w) => parseInt(w, 16)) : []);
  const head = part(halves[0]!);
  const tail = halves.length === 2 ? part(halves[1]!) : [];
  const fill = 8 - head.length - tail.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return null;
  const words = [...head, ...Array<number>(fill).fill(0), ...tail];
  return words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : null;
}

/** Whether an IP address is a public unicast address (what a livestream may reach by default). */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !blocked.check(address, 'ipv4');
  if (family !== 6) return false;
  const inner = embeddedIpv4(address);
  if (inner !== null && !isPublicAddress(inner)) return false;
  return !blocked.check(address, 'ipv6');
}

/** The target is not public and the relay does not allow private targets. */
export class PrivateTargetError extends Error {
  override readonly name = 'PrivateTargetError';
}

/** Resolving the name failed (told to the caller like any other failure to reach the server). */
export class UnresolvedTargetError extends Error {
  override readonly name = 'UnresolvedTargetError';
}

/**
 * Resolve `host` to the one address to connect to. Refuses (`PrivateTargetError`) when any
 * address it resolves to is not public — a name with one public and one private answer is
 * refused too — unless `allowPrivate`.
 */
export async function resolveTarget(host: string, allowPrivate: boolean): Promise<{ address: string; family: 4 | 6 }> {
  let answers: NameAddress[];
  try {
    answers = await lookupName(host);
  } catch {
    throw new UnresolvedTargetError('the name does not resolve');
  }
  if (answers.length === 0) throw new UnresolvedTargetError('the name does not resolve');
  if (!allowPrivate && answers.some((a) => !isPublicAddress(a.address))) throw new PrivateTargetError('not a public address');
  const first = answers[0]!;
  return { address: first.address, family: first.family };
}
