import { Connection, parseMessage, StunProtocol } from 'werift';
import type { TokenBucket } from '../data/token-bucket.ts';
import { dtlsDatagramRate, isDtls, stunShape, wellFormedMedia } from './datagram-check.ts';

/**
 * What the relay's media sockets take from the network, whoever sends it. werift (0.25) answers
 * any STUN request that names a user, without checking its MESSAGE-INTEGRITY, makes a candidate
 * pair for every new source address (each request re-sorts them all), and hands any datagram
 * that is not STUN, from any address, to DTLS and SRTP. So one unauthenticated UDP packet could
 * find every transport (a port scan), grow a transport's pairs without bound, or close a
 * member's DTLS with a plaintext alert, silently ending its media.
 *
 * The guard sits in front of werift's UDP protocol on the relay's (ICE-lite) connections (RFC
 * 8445 §7.3): a request is taken only if it is a binding request whose USERNAME starts with the
 * transport's own ufrag and whose MESSAGE-INTEGRITY is signed with the transport's password (which
 * only the member that negotiated it was given); anything else (DTLS, SRTP, other STUN) only
 * from an address that has sent one, and DTLS and SRTP only in a shape werift can read safely
 * (`datagram-check.ts`: werift reads some of it before it authenticates it). Everything else is
 * dropped unanswered. A transport trusts
 * the last {@link MAX_PEERS} such addresses (a client that roams moves on), and at most
 * {@link MAX_PEER_ADDRESSES} in its life (each new one costs werift a candidate pair).
 */
export const MAX_PEERS = 8;
export const MAX_PEER_ADDRESSES = 64;

/** STUN's binding method, and the class of a request (RFC 5389 §6). */
const BINDING = 0x0001;
const REQUEST = 0x0000;
const owner = Symbol('tessera.iceOwner');
const peers = Symbol('tessera.icePeers');
const seen = Symbol('tessera.icePeersSeen');
const installed = Symbol('tessera.iceGuard');
const rate = Symbol('tessera.icePacketRate');

type Address = [string, number];
export interface IceOwner {
  localUsername: string;
  localPassword: string;
  userHistory?: Record<string, string>;
  iceLite?: boolean;
}
/** werift's UDP protocol as the guard marks it: its ICE connection, and the peers that proved themselves. */
export interface GuardedProtocol {
  [owner]?: IceOwner;
  [peers]?: Set<string>;
  [seen]?: number;
  [rate]?: TokenBucket;
}

/** Whether a binding request is signed for `ice`: its USERNAME names the transport's ufrag, its MESSAGE-INTEGRITY that ufrag's password. */
function signed(ice: IceOwner, data: Buffer, username: unknown): boolean {
  if (typeof username !== 'string') return false;
  const local = username.slice(0, username.indexOf(':'));
  const password = local === ice.localUsername ? ice.localPassword : ice.userHistory?.[local];
  return typeof password === 'string' && parseMessage(data, Buffer.from(password, 'utf8')) !== undefined;
}

/**
 * Install the guard on werift's classes (once per process; every ICE-lite peer connection made
 * after it is guarded). Throws if werift no longer has the methods it wraps: an upgrade of werift
 * must not silently drop the guard.
 */
export function installIceGuard(): void {
  const protocolProto = StunProtocol.prototype as unknown as Record<string | symbol, unknown>;
  const connectionProto = Connection.prototype as unknown as Record<string | symbol, unknown>;
  if (protocolProto[installed]) return;
  const received = protocolProto.datagramReceived;
  const ensure = connectionProto.ensureProtocol;
  if (typeof received !== 'function' || typeof ensure !== 'function') throw new Error('werift changed: the ICE guard cannot wrap StunProtocol.datagramReceived and Connection.ensureProtocol');
  connectionProto.ensureProtocol = function (this: IceOwner, protocol: GuardedProtocol, ...rest: unknown[]) {
    // the relay's connections are ICE-lite; a full-ICE connection (a client) sends its own checks
    if (this.iceLite === true) protocol[owner] = this;
    return (ensure as (...a: unknown[]) => unknown).call(this, protocol, ...rest);
  };
  protocolProto.datagramReceived = function (this: GuardedProtocol, data: Buffer, addr: Address) {
    let pass = false;
    try {
      pass = admits(this, data, addr);
    } catch {
      // a datagram the guard cannot read is not one werift should read either
      guardDrops.malformed++;
    }
    if (pass) (received as (d: Buffer, a: Address) => void).call(this, data, addr);
  };
  protocolProto[installed] = true;
}

/**
 * Datagrams the guard dropped in this process, by why: `unproven` (a request not signed for the
 * transport, or anything else from an address that never sent one, or past the addresses a
 * transport trusts), `malformed` (a shape werift must not read: `datagram-check.ts`), `rate`
 * (DTLS past its rate). A rising count is someone probing or flooding the media ports (`/metrics`).
 */
export const guardDrops = { unproven: 0, malformed: 0, rate: 0 };

/** Whether one datagram from `addr` reaches the ICE connection that owns `protocol` (see the module's doc); a drop is counted in {@link guardDrops}. */
export function admits(protocol: GuardedProtocol, data: Buffer, addr: Address): boolean {
  const verdict = judge(protocol, data, addr);
  if (verdict === true) return true;
  guardDrops[verdict]++;
  return false;
}

function judge(protocol: GuardedProtocol, data: Buffer, addr: Address): true | keyof typeof guardDrops {
  // before anything else: werift parses every datagram of STUN's shape, owned or not
  const shape = stunShape(data);
  if (shape === 'drop') return 'malformed';
  const ice = protocol[owner];
  if (!ice) return true;
  const key = `${addr[0]}\u0000${addr[1]}`;
  const known = (protocol[peers] ??= new Set());
  const message = shape === 'stun' ? parseMessage(data) : undefined;
  // anything but a request (DTLS, SRTP, a STUN response or indication): only from a proven peer
  if (!message) {
    if (!known.has(key)) return 'unproven';
    if (!wellFormedMedia(data)) return 'malformed';
    return !isDtls(data) || (protocol[rate] ??= dtlsDatagramRate()).take() ? true : 'rate';
  }
  if (message.messageClass !== REQUEST) return known.has(key) || 'unproven';
  if (message.messageMethod !== BINDING || !signed(ice, data, message.getAttributeValue('USERNAME'))) return 'unproven';
  if (known.has(key)) {
    // the most recent last (a roaming client's old addresses are the first to go)
    known.delete(key);
    known.add(key);
    return true;
  }
  if ((protocol[seen] ?? 0) >= MAX_PEER_ADDRESSES) return 'unproven';
  protocol[seen] = (protocol[seen] ?? 0) + 1;
  if (known.size >= MAX_PEERS) known.delete(known.values().next().value!);
  known.add(key);
  return true;
}
