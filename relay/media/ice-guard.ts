import { Connection, parseMessage, StunProtocol } from 'werift';

/**
 * What the relay's media sockets take from the network, whoever sends it. werift (0.25) answers
 * any STUN binding request that names a user, without checking its MESSAGE-INTEGRITY, makes a
 * candidate pair for every new source address (each request re-sorts them all), and hands any
 * datagram that is not STUN, from any address, to DTLS and SRTP. So one unauthenticated UDP
 * packet could find every transport (a port scan), grow a transport's pairs without bound, or
 * close a member's DTLS with a plaintext alert, silently ending its media.
 *
 * The guard sits in front of werift's UDP protocol (ICE, RFC 8445 §7.3): a binding request is
 * taken only if its USERNAME starts with the transport's own ufrag and its MESSAGE-INTEGRITY is
 * signed with the transport's password (which only the member that negotiated it was given),
 * from at most {@link MAX_PEERS} source addresses per transport; anything else (DTLS, SRTP) only
 * from an address that has sent such a request. Everything else is dropped unanswered.
 */
export const MAX_PEERS = 8;

/** STUN's binding method, and the class of a request (RFC 5389 §6). */
const BINDING = 0x0001;
const REQUEST = 0x0000;
const owner = Symbol('tessera.iceOwner');
const peers = Symbol('tessera.icePeers');
const installed = Symbol('tessera.iceGuard');

type Address = [string, number];
export interface IceOwner {
  localUsername: string;
  localPassword: string;
  userHistory?: Record<string, string>;
}
/** werift's UDP protocol as the guard marks it: its ICE connection, and the peers that proved themselves. */
export interface GuardedProtocol {
  [owner]?: IceOwner;
  [peers]?: Set<string>;
}

/** Whether a binding request is signed for `ice`: its USERNAME names the transport's ufrag, its MESSAGE-INTEGRITY that ufrag's password. */
function signed(ice: IceOwner, data: Buffer, username: unknown): boolean {
  if (typeof username !== 'string') return false;
  const local = username.slice(0, username.indexOf(':'));
  const password = local === ice.localUsername ? ice.localPassword : ice.userHistory?.[local];
  return typeof password === 'string' && parseMessage(data, Buffer.from(password, 'utf8')) !== undefined;
}

/**
 * Install the guard on werift's classes (once per process; every peer connection made after it
 * is guarded). Throws if werift no longer has the methods it wraps: an upgrade of werift must
 * not silently drop the guard.
 */
export function installIceGuard(): void {
  const protocolProto = StunProtocol.prototype as unknown as Record<string | symbol, unknown>;
  const connectionProto = Connection.prototype as unknown as Record<string | symbol, unknown>;
  if (protocolProto[installed]) return;
  const received = protocolProto.datagramReceived;
  const ensure = connectionProto.ensureProtocol;
  if (typeof received !== 'function' || typeof ensure !== 'function') throw new Error('werift changed: the ICE guard cannot wrap StunProtocol.datagramReceived and Connection.ensureProtocol');
  connectionProto.ensureProtocol = function (this: IceOwner, protocol: GuardedProtocol, ...rest: unknown[]) {
    protocol[owner] = this;
    return (ensure as (...a: unknown[]) => unknown).call(this, protocol, ...rest);
  };
  protocolProto.datagramReceived = function (this: GuardedProtocol, data: Buffer, addr: Address) {
    if (admits(this, data, addr)) (received as (d: Buffer, a: Address) => void).call(this, data, addr);
  };
  protocolProto[installed] = true;
}

/** Whether one datagram from `addr` reaches the ICE connection that owns `protocol` (see the module's doc). */
export function admits(protocol: GuardedProtocol, data: Buffer, addr: Address): boolean {
  const ice = protocol[owner];
  if (!ice) return true;
  const key = `${addr[0]}\u0000${addr[1]}`;
  const known = (protocol[peers] ??= new Set());
  const message = parseMessage(data);
  // not STUN (DTLS, SRTP): only from a peer that proved it holds the transport's password
  if (!message) return known.has(key);
  // responses and indications: werift matches a response to a request of its own, and checks it
  if (message.messageMethod !== BINDING || message.messageClass !== REQUEST) return true;
  if (!signed(ice, data, message.getAttributeValue('USERNAME'))) return false;
  if (!known.has(key)) {
    if (known.size >= MAX_PEERS) return false;
    known.add(key);
  }
  return true;
}
