import { TokenBucket } from '../data/token-bucket.ts';

/**
 * What a media datagram must look like before werift reads it (RFC 7983 demultiplexes by the
 * first byte). werift 0.25 parses an SRTP packet's header before it checks its authentication
 * tag, and reads past the end of the datagram: a 32-byte packet announcing a 65,535-word header
 * extension kept the relay's event loop busy for 192 s, with no key at all. It also allocates
 * every DTLS handshake message at the length its fragment claims (16 MiB a fragment, 235 in one
 * datagram). So the ICE guard drops what no browser sends before werift sees it: datagrams larger
 * than a path's MTU, RTP whose header runs past its end or carries a large extension, and DTLS
 * records or handshake fragments whose lengths do not fit. And at most {@link DTLS_DATAGRAM_RATE}
 * DTLS datagrams a second reach a transport: after its handshake a transport carries SRTP only,
 * while a DTLS record that fails decryption costs werift more than a media packet. (SRTP is not
 * counted: a stranger who forged a member's address could otherwise use up its media's share
 * with packets that fail authentication.)
 */

/** DTLS datagrams a transport takes per second (a handshake is a few flights, retransmitted a few times). */
export const DTLS_DATAGRAM_RATE = 100;
/** ...and at once. */
export const DTLS_DATAGRAM_BURST = 200;

/** Whether a datagram is DTLS (RFC 7983). */
export function isDtls(data: Buffer): boolean {
  return data.length > 0 && data[0]! >= 20 && data[0]! <= 63;
}

/** The bucket of DTLS datagrams of one transport. */
export function dtlsDatagramRate(now?: () => number): TokenBucket {
  return new TokenBucket(DTLS_DATAGRAM_RATE, DTLS_DATAGRAM_BURST, now);
}

/** The largest media datagram taken: Ethernet's MTU (browsers keep DTLS and SRTP under about 1,200 bytes). */
export const MAX_MEDIA_DATAGRAM = 1500;

/**
 * The largest RTP header extension taken, in 32-bit words. A browser's extensions (MID, RID,
 * audio level, send time, transport sequence, video orientation...) are tens of bytes; werift
 * parses them at a cost quadratic in their count.
 */
export const MAX_RTP_EXTENSION_WORDS = 64;

/** The largest DTLS handshake message taken (bytes): a browser's largest, its certificate, is about one KB. */
export const MAX_HANDSHAKE_BYTES = 16 * 1024;

/** Handshake fragments one DTLS record may carry (a browser sends one, at most a flight's few). */
export const MAX_FRAGMENTS_PER_RECORD = 8;

/** DTLS records one datagram may carry (a browser's largest flight is five to seven). */
export const MAX_RECORDS_PER_DATAGRAM = 8;

const RTP_HEADER = 12;
const RTCP_MIN = 8;
const DTLS_RECORD_HEADER = 13;
const HANDSHAKE_HEADER = 12;
const CONTENT_HANDSHAKE = 22;

/** Whether a datagram that is not STUN may reach werift's DTLS or SRTP (see the module's doc). */
export function wellFormedMedia(data: Buffer): boolean {
  if (data.length === 0 || data.length > MAX_MEDIA_DATAGRAM) return false;
  const first = data[0]!;
  if (first >= 20 && first <= 63) return dtlsWellFormed(data);
  if (first >= 128 && first <= 191) return isRtcp(data) ? data.length >= RTCP_MIN : rtpWellFormed(data);
  // TURN channels and reserved ranges: nothing the relay speaks
  return false;
}

/**
 * RTCP as werift tells it from RTP: a second byte of 192–208 (SR to XR). Not RFC 5761's wider
 * 192–223: werift reads a datagram of 209–223 as RTP, so that is what it is checked as.
 */
function isRtcp(data: Buffer): boolean {
  return data.length >= 2 && data[1]! >= 192 && data[1]! <= 208;
}

/** An RTP header (CSRCs and extension) that ends within the datagram, with an extension of at most {@link MAX_RTP_EXTENSION_WORDS}. */
function rtpWellFormed(data: Buffer): boolean {
  if (data.length < RTP_HEADER) return false;
  let end = RTP_HEADER + 4 * (data[0]! & 0x0f);
  if (data[0]! & 0x10) {
    if (end + 4 > data.length) return false;
    const words = data.readUInt16BE(end + 2);
    if (words > MAX_RTP_EXTENSION_WORDS) return false;
    end += 4 + 4 * words;
  }
  return end <= data.length;
}

/** At most {@link MAX_RECORDS_PER_DATAGRAM} DTLS records of the four content types, that fit the datagram; plaintext handshake fragments that fit their record and claim at most {@link MAX_HANDSHAKE_BYTES}. */
function dtlsWellFormed(data: Buffer): boolean {
  for (let at = 0, records = 0; at < data.length; ) {
    if (++records > MAX_RECORDS_PER_DATAGRAM || at + DTLS_RECORD_HEADER > data.length) return false;
    // change_cipher_spec, alert, handshake, application data: all DTLS 1.2 has
    const type = data[at]!;
    if (type < 20 || type > 23) return false;
    const epoch = data.readUInt16BE(at + 3);
    const body = at + DTLS_RECORD_HEADER;
    const end = body + data.readUInt16BE(at + 11);
    if (end > data.length) return false;
    // an encrypted record (epoch 1 on) is opaque here; werift authenticates it before it reads it
    if (type === CONTENT_HANDSHAKE && epoch === 0 && !fragmentsFit(data, body, end)) return false;
    at = end;
  }
  return true;
}

function fragmentsFit(data: Buffer, from: number, end: number): boolean {
  let count = 0;
  for (let at = from; at < end; ) {
    if (++count > MAX_FRAGMENTS_PER_RECORD || at + HANDSHAKE_HEADER > end) return false;
    const length = data.readUIntBE(at + 1, 3);
    const offset = data.readUIntBE(at + 6, 3);
    const fragment = data.readUIntBE(at + 9, 3);
    if (length > MAX_HANDSHAKE_BYTES || offset + fragment > length || at + HANDSHAKE_HEADER + fragment > end) return false;
    at += HANDSHAKE_HEADER + fragment;
  }
  return true;
}

/** The largest STUN message read: a browser's binding request is 100–150 bytes; an ICE ufrag may be 256 characters, a USERNAME two of them. */
export const MAX_STUN_BYTES = 1280;
/** Attributes a STUN message may carry (a browser's request carries seven or eight). */
export const MAX_STUN_ATTRIBUTES = 16;
const MAGIC_COOKIE = 0x2112a442;
const MESSAGE_INTEGRITY = 0x0008;
const FINGERPRINT = 0x8028;

/**
 * How a datagram that may be STUN is to be taken: `stun` when it is one werift may parse, `drop`
 * when werift would parse it as STUN but it is not within these bounds (or its first byte is
 * STUN's, 0–3, and it is no STUN at all), `other` when werift does not take it for STUN (DTLS, SRTP). werift's parser checks every FINGERPRINT and
 * MESSAGE-INTEGRITY it meets over the whole message before it, copying it each time: one 64 KB
 * datagram of 8,185 FINGERPRINTs, from anyone, no token, held the relay 670–770 ms; 64 of them
 * 17 s. So the attributes are walked here first, in one pass over at most
 * {@link MAX_STUN_BYTES}: at most {@link MAX_STUN_ATTRIBUTES}, whole, at most one
 * MESSAGE-INTEGRITY followed by nothing but a FINGERPRINT, and a FINGERPRINT only last.
 */
export function stunShape(data: Buffer): 'stun' | 'drop' | 'other' {
  // what werift parses as STUN (its isStunMessage): a first byte of 0–63, the cookie, a length that fits;
  // a first byte of 20–63 is DTLS's range too, so a datagram must not get past as DTLS what werift reads as STUN
  const stunLike = data.length >= 20 && (data[0]! & 0xc0) === 0 && data.readUInt32BE(4) === MAGIC_COOKIE && data.readUInt16BE(2) === data.length - 20 && data.length % 4 === 0;
  if (!stunLike) return data.length > 0 && data[0]! <= 3 ? 'drop' : 'other';
  if (data.length > MAX_STUN_BYTES) return 'drop';
  let at = 20;
  let count = 0;
  let integrity = false;
  while (at < data.length) {
    if (at + 4 > data.length || ++count > MAX_STUN_ATTRIBUTES) return 'drop';
    const type = data.readUInt16BE(at);
    const length = data.readUInt16BE(at + 2);
    const end = at + 4 + length + ((4 - (length % 4)) % 4);
    if (end > data.length) return 'drop';
    if (type === FINGERPRINT) return end === data.length ? 'stun' : 'drop';
    if (integrity) return 'drop';
    if (type === MESSAGE_INTEGRITY) integrity = true;
    at = end;
  }
  return 'stun';
}
