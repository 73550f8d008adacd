import { DtlsSocket, RtcpPacketConverter, RTCRtpSender, SrtpAuthenticationError, SrtpSession } from 'werift';
import { TokenBucket } from '../data/token-bucket.ts';

/**
 * What werift (0.25) does with a member's authenticated packets, bounded. A member holds its own
 * transport's SRTP keys and DTLS session, so whatever it encrypts passes werift's checks, and
 * werift then trusts lengths and counts it was sent (an attack review, `docs/security.md`):
 *
 * - RTCP: each packet of a compound was parsed with the whole rest of the datagram, lengths
 *   unchecked (one 65 KB compound of one-word NACKs: a 44 s stall, then the heap ran out); a
 *   transport-wide congestion feedback of 40 bytes may claim 65,535 statuses (0.9 s a datagram);
 *   a NACK may name the same cached packets again and again (276,131 retransmissions for one
 *   datagram).
 * - RTP: a jump of the sequence number marked every number in between lost (65,000 a packet, 57 ms
 *   each), and every loss sorted them all; every new SSRC kept SRTP state for the transport's
 *   life (hundreds of MiB, and receiver reports over all of them).
 * - DTLS: handshake fragments were buffered without limit, and kept being read after the handshake.
 * - NACKs: the loop asking for lost packets never stopped once it had started.
 *
 * Each bound is applied by wrapping the werift method that does the work (as the ICE guard
 * does); {@link installWeriftHardening} throws if one of them is gone, so that an upgrade of
 * werift cannot silently drop a bound.
 */

/** RTCP packets of one compound that are read (a browser's compound has two to four). */
export const MAX_RTCP_PACKETS = 16;
/** Packets one NACK may ask to be sent again: the sender keeps 128, and each is asked for once. */
export const MAX_NACKED = 128;
/** Retransmissions a sender makes for its subscriber per second, and in a burst. */
export const RETRANSMIT_RATE = 400;
/**
 * Retransmissions all the subscriptions of one member get per second, and in a burst: a viewer's
 * NACKs on 50 subscriptions of one camera, each asking for the 100 packets the sender keeps every
 * 250 ms, made the relay send 16,000–22,000 packets a second (700 times what it was asked in
 * bytes) and held its loop 96–330 ms a second. A member's, not a token's: the viewers of one
 * shared audience token each recover their own losses.
 */
export const OWNER_RETRANSMIT_RATE = 1600;
/** SSRCs one SRTP context keeps state for (a publication's layers and their repair streams are a few). */
export const MAX_SSRCS = 16;
/** DTLS handshake messages one socket reads in its life (a handshake is five, retransmitted a few times). */
export const MAX_HANDSHAKE_MESSAGES = 64;
/** Fragments of unfinished handshake messages one socket holds. */
export const MAX_BUFFERED_FRAGMENTS = 16;

const RTCP_TRANSPORT_FEEDBACK = 205;
const FMT_NACK = 1;
const FMT_TWCC = 15;
const SEQUENCE_SPACE = 0x10000;

const installed = Symbol('tessera.weriftHardening');
const handshakes = Symbol('tessera.handshakes');
const retransmits = Symbol('tessera.retransmits');
const ownerRetransmits = Symbol('tessera.ownerRetransmits');

/** The retransmissions of `sender` also draw from `bucket`, its member's ({@link OWNER_RETRANSMIT_RATE}). */
export function shareRetransmissions(sender: unknown, bucket: TokenBucket): void {
  (sender as Proto)[ownerRetransmits] = bucket;
}

type Method = (this: unknown, ...args: never[]) => unknown;
type Proto = Record<string | symbol, unknown>;

function method(owner: Proto, name: string): Method {
  const fn = owner[name];
  if (typeof fn !== 'function') throw new Error(`werift changed: cannot bound ${name}`);
  return fn as Method;
}

/** Install every bound (once per process). */
export function installWeriftHardening(): void {
  const converter = RtcpPacketConverter as unknown as Proto;
  if (converter[installed]) return;
  boundRtcpParsing(converter);
  boundRetransmissions(RTCRtpSender.prototype as unknown as Proto);
  boundSrtpState();
  boundDtlsHandshakes(DtlsSocket.prototype as unknown as Proto);
  converter[installed] = true;
}

interface NackLike {
  lost: number[];
}
interface ParsedRtcp {
  type: number;
  feedback?: unknown;
}

/**
 * Each packet is parsed from its own bytes (version 2, its length within the compound), at most
 * {@link MAX_RTCP_PACKETS} of them; transport-wide congestion feedback (never negotiated) is
 * dropped unread; a NACK's lost list keeps each number once, at most {@link MAX_NACKED}.
 */
function boundRtcpParsing(converter: Proto): void {
  const parse = method(converter, 'deSerialize') as unknown as (data: Buffer) => ParsedRtcp[];
  converter.deSerialize = function (data: Buffer): ParsedRtcp[] {
    const out: ParsedRtcp[] = [];
    for (let at = 0, n = 0; at + 4 <= data.length && n < MAX_RTCP_PACKETS; n++) {
      if (data[at]! >> 6 !== 2) break;
      const end = at + 4 * (data.readUInt16BE(at + 2) + 1);
      if (end > data.length) break;
      const fmt = data[at]! & 0x1f;
      if (!(data[at + 1] === RTCP_TRANSPORT_FEEDBACK && fmt === FMT_TWCC)) {
        for (const packet of parse.call(converter, data.subarray(at, end))) {
          if (data[at + 1] === RTCP_TRANSPORT_FEEDBACK && fmt === FMT_NACK) boundNack(packet.feedback as NackLike | undefined);
          out.push(packet);
        }
      }
      at = end;
    }
    return out;
  };
}

function boundNack(nack: NackLike | undefined): void {
  if (!nack || !Array.isArray(nack.lost)) return;
  nack.lost = [...new Set(nack.lost)].slice(0, MAX_NACKED);
}

/** A sender retransmits at most {@link RETRANSMIT_RATE} packets a second for its subscriber; the rest of a NACK is dropped. */
function boundRetransmissions(sender: Proto): void {
  const handle = method(sender, 'handleRtcpPacket') as unknown as (this: Proto, packet: ParsedRtcp & { feedback?: NackLike & { count?: number } }) => void;
  sender.handleRtcpPacket = function (this: Proto, packet: ParsedRtcp & { feedback?: NackLike & { count?: number } }) {
    if (packet.type === RTCP_TRANSPORT_FEEDBACK) {
      if (packet.feedback?.count === FMT_TWCC) return;
      if (packet.feedback?.count === FMT_NACK && Array.isArray(packet.feedback.lost)) {
        // the sender's own bucket: its subscriber's NACKs draw from it
        const bucket = ((this[retransmits] as TokenBucket | undefined) ??= new TokenBucket(RETRANSMIT_RATE, RETRANSMIT_RATE));
        const owner = this[ownerRetransmits] as TokenBucket | undefined;
        const own = bucket.takeUpTo(packet.feedback.lost.length);
        // the member's budget pays only for what this sender may send: the rest stays for its others
        const allowed = owner ? owner.takeUpTo(own) : own;
        if (allowed < own) bucket.give(own - allowed);
        if (allowed < packet.feedback.lost.length) packet.feedback.lost = packet.feedback.lost.slice(0, allowed);
      }
    }
    return handle.call(this, packet);
  };
}

/**
 * A transport's SRTP context keeps state for at most {@link MAX_SSRCS} SSRCs it receives: a
 * packet of one more is dropped as unauthenticated (werift's decrypt drops those quietly). werift
 * keeps a state only once a packet authenticated, so only the member itself can fill them.
 */
function boundSrtpState(): void {
  const key = Buffer.alloc(16);
  const salt = Buffer.alloc(14);
  // a throwaway session: werift exports the sessions, not their context classes
  const session = new SrtpSession({ keys: { localMasterKey: key, localMasterSalt: salt, remoteMasterKey: key, remoteMasterSalt: salt }, profile: 1 }) as unknown as { ContextCls: { prototype: Proto } };
  const context = session.ContextCls.prototype;
  const decrypt = method(context, 'decryptRtp') as unknown as (this: Proto, cipherText: Buffer, ...rest: unknown[]) => unknown;
  context.decryptRtp = function (this: Proto, cipherText: Buffer, ...rest: unknown[]) {
    const states = this.srtpSSRCStates as Record<number, unknown> | undefined;
    if (states && cipherText.length >= 12 && states[cipherText.readUInt32BE(8)] === undefined && Object.keys(states).length >= MAX_SSRCS) throw new SsrcLimit();
    return decrypt.call(this, cipherText, ...rest);
  };
}

/** werift drops a packet its decrypt rejects as unauthenticated; one of a new SSRC past the bound is such a packet. */
class SsrcLimit extends SrtpAuthenticationError {
  constructor() {
    super(`more than ${MAX_SSRCS} SSRCs on one transport`);
  }
}

interface Fragment {
  length: number;
  fragment_offset: number;
  fragment_length: number;
}

/**
 * A DTLS socket reads at most {@link MAX_HANDSHAKE_MESSAGES} handshake messages in its life,
 * each claiming at most 16 KiB and fitting it, and holds at most {@link MAX_BUFFERED_FRAGMENTS}
 * fragments of unfinished ones.
 */
function boundDtlsHandshakes(socket: Proto): void {
  const handle = method(socket, 'handleFragmentHandshake') as unknown as (this: Proto, messages: Fragment[]) => Fragment[];
  socket.handleFragmentHandshake = function (this: Proto, messages: Fragment[]) {
    const seen = ((this[handshakes] as number | undefined) ?? 0) + messages.length;
    this[handshakes] = seen;
    if (seen > MAX_HANDSHAKE_MESSAGES) return [];
    const fit = messages.filter((m) => m.length <= 16 * 1024 && m.fragment_offset + m.fragment_length <= m.length);
    const buffered = this.bufferFragmentedHandshakes;
    if (Array.isArray(buffered) && buffered.length >= MAX_BUFFERED_FRAGMENTS) buffered.length = 0;
    return handle.call(this, fit);
  };
}

/** The sequence gap from `last` to `next`, forward, modulo 2^16. */
export function sequenceGap(last: number, next: number): number {
  return (next - last + SEQUENCE_SPACE) % SEQUENCE_SPACE;
}

const nackBound = Symbol('tessera.nackBound');
const tracked = Symbol('tessera.nackSsrc');
const trackedAt = Symbol('tessera.nackSsrcAt');

/** Packets lost at once that are asked for again: a larger gap is a restart of the stream (a key frame repairs it). */
export const MAX_SEQUENCE_GAP = 64;
/** Sequence numbers a receiver asks for again at most (werift's own bound, kept without its sort). */
export const MAX_LOST = 150;
/** How long the SSRC a receiver asks for lost packets of may be silent before another takes its place (ms). */
const SSRC_SILENT_MS = 2000;

interface NackState {
  newEstSeqNum: number;
  _lost: Record<number, number>;
  mediaSourceSsrc?: number;
  nackLoop?: ReturnType<typeof setInterval> | undefined;
  closed?: boolean;
  sendNack(): Promise<void>;
  setLost(seq: number, count: number): void;
  [tracked]?: number;
  [trackedAt]?: number;
}

/**
 * A receiver's NACK handler, replaced (werift's compared sequence numbers as plain numbers, marked
 * every number of any gap lost, and sorted them all on every loss: 57 ms a packet of a member's
 * own jumps). Gaps are modulo 2^16: a late packet is late, a gap of more than
 * {@link MAX_SEQUENCE_GAP} forward (or 1,024 back) is a restart, at most the newest
 * {@link MAX_LOST} numbers are asked for (sorted only when there are more). One SSRC
 * at a time (werift's handler asks for one): the first seen, until it is silent for two seconds,
 * so the layers of a simulcast publication do not restart each other's count. werift does not
 * export the class: it is bound through the first receiver the relay makes (`handler` is that
 * receiver's `nack`).
 */
/** At most {@link MAX_LOST} numbers asked for: the newest (those nearest behind `newest`, modulo 2^16). */
function keepNewest(lost: Record<number, number>, newest: number): void {
  const numbers = Object.keys(lost).map(Number);
  if (numbers.length <= MAX_LOST) return;
  numbers.sort((a, b) => sequenceGap(a, newest) - sequenceGap(b, newest));
  for (const seq of numbers.slice(MAX_LOST)) delete lost[seq];
}

export function boundNackHandler(handler: object): void {
  const proto = Object.getPrototypeOf(handler) as Proto;
  if (proto[nackBound]) return;
  method(proto, 'addPacket');
  method(proto, 'setLost');
  proto.addPacket = function (this: NackState, packet: { header: { sequenceNumber: number; ssrc: number } }) {
    const { sequenceNumber: seq, ssrc } = packet.header;
    const now = performance.now();
    if (this[tracked] !== ssrc) {
      if (this[tracked] !== undefined && now - (this[trackedAt] ?? 0) < SSRC_SILENT_MS) return;
      // the first SSRC, or one that took a silent one's place: its first packet starts the count
      this[tracked] = ssrc;
      this[trackedAt] = now;
      this.mediaSourceSsrc = ssrc;
      this._lost = {};
      this.newEstSeqNum = seq;
      return;
    }
    this[trackedAt] = now;
    if (this._lost[seq] !== undefined) {
      delete this._lost[seq];
      return;
    }
    const gap = sequenceGap(this.newEstSeqNum, seq);
    if (gap === 0) return;
    if (gap >= SEQUENCE_SPACE / 2) {
      // a late packet never asked for, or (far behind) the stream starting again lower
      if (SEQUENCE_SPACE - gap > MAX_SEQUENCE_GAP * 16) {
        this._lost = {};
        this.newEstSeqNum = seq;
      }
      return;
    }
    if (gap > MAX_SEQUENCE_GAP) {
      this._lost = {};
    } else {
      for (let i = 1; i < gap; i++) this.setLost((this.newEstSeqNum + i) % SEQUENCE_SPACE, 1);
      if (gap > 1) keepNewest(this._lost, seq);
    }
    this.newEstSeqNum = seq;
  };
  // werift's loop asked every 5 ms while anything was lost, and stopped once nothing was, but only
  // after its send settled, which with nothing to ask for it never does: after the first lost
  // packet of a publication the loop ran for the transport's life (200 wake-ups a second each)
  proto.setLost = function (this: NackState, seq: number, count: number) {
    this._lost[seq] = count;
    if (this.nackLoop || this.closed) return;
    this.nackLoop = setInterval(() => {
      for (const _ in this._lost) {
        this.sendNack().catch(() => undefined);
        return;
      }
      clearInterval(this.nackLoop);
      this.nackLoop = undefined;
    }, 5);
  };
  proto[nackBound] = true;
}
