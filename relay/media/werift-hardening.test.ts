import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DtlsSocket, RtcpPacketConverter, RTCPeerConnection, RTCRtpSender, RtpHeader, SrtpSession } from 'werift';
import { boundNackHandler, installWeriftHardening, MAX_BUFFERED_FRAGMENTS, MAX_HANDSHAKE_MESSAGES, MAX_NACKED, MAX_RTCP_PACKETS, MAX_SSRCS, OWNER_RETRANSMIT_RATE, RETRANSMIT_RATE, shareRetransmissions } from './werift-hardening.ts';
import { TokenBucket } from '../data/token-bucket.ts';

installWeriftHardening();

/** An RTCP header: version 2, `fmt`, packet type, length in words minus one. */
const header = (fmt: number, type: number, words: number) => Buffer.from([0x80 | fmt, type, words >> 8, words & 0xff]);
/** A generic NACK (RTPFB, FMT 1) asking for `pid` and the 16 after it, `entries` times. */
function nack(pid: number, entries: number): Buffer {
  const fci = Buffer.alloc(4 * entries);
  for (let i = 0; i < entries; i++) {
    fci.writeUInt16BE(pid, 4 * i);
    fci.writeUInt16BE(0xffff, 4 * i + 2);
  }
  return Buffer.concat([header(1, 205, 2 + entries), Buffer.from([0, 0, 0, 1, 0, 0, 0, 2]), fci]);
}
/** A receiver report with no blocks. */
const rr = () => Buffer.concat([header(0, 201, 1), Buffer.from([0, 0, 0, 1])]);
type Parsed = Array<{ type: number; feedback?: { count: number; lost?: number[] } }>;
const parse = (b: Buffer) => (RtcpPacketConverter.deSerialize as unknown as (b: Buffer) => Parsed)(b);

describe('werift, bounded where it trusts what a member sends (issue 11)', () => {
  it('a browser compound (a receiver report and a NACK) parses as before', () => {
    const packets = parse(Buffer.concat([rr(), nack(100, 1)]));
    assert.deepEqual(packets.map((p) => p.type), [201, 205]);
    assert.deepEqual(packets[1]!.feedback!.lost, Array.from({ length: 17 }, (_, i) => 100 + i));
  });

  it('a compound of one-word NACKs over 64 KB is parsed packet by packet, at most 16, each from its own bytes (it ran the heap out)', () => {
    const unit = Buffer.concat([header(1, 205, 1), Buffer.from([0, 0, 0xff, 0xff])]);
    const hostile = Buffer.concat(Array.from({ length: 8000 }, () => unit));
    const packets = parse(hostile);
    assert.ok(packets.length <= MAX_RTCP_PACKETS, `${packets.length} packets`);
    for (const p of packets) assert.ok((p.feedback?.lost?.length ?? 0) <= MAX_NACKED);
  });

  it('lengths that run past the compound, and versions other than 2, end the parse', () => {
    assert.deepEqual(parse(Buffer.concat([rr(), header(0, 201, 200)])).length, 1);
    assert.deepEqual(parse(Buffer.concat([Buffer.from([0x40, 201, 0, 1, 0, 0, 0, 1]), rr()])).length, 0);
  });

  it('transport-wide congestion feedback, never negotiated, is dropped unread (40 bytes could claim 65,535 statuses)', () => {
    const twcc = Buffer.concat([header(15, 205, 5), Buffer.alloc(8), Buffer.from([0, 1, 0xff, 0xff, 0, 0, 0, 0]), Buffer.from([0x1f, 0xff, 0x1f, 0xff])]);
    assert.deepEqual(parse(Buffer.concat([twcc, rr()])).map((p) => p.type), [201]);
  });

  it('a NACK naming the same packets again and again asks for each once, at most 128', () => {
    const [p] = parse(nack(7, 300));
    assert.deepEqual(p!.feedback!.lost, Array.from({ length: 17 }, (_, i) => 7 + i));
    const wide = Buffer.concat([header(1, 205, 2 + 20), Buffer.alloc(8), ...Array.from({ length: 20 }, (_, i) => Buffer.from([0, i * 17, 0xff, 0xff]))]);
    assert.equal(parse(wide)[0]!.feedback!.lost!.length, MAX_NACKED);
  });

  it('a sender retransmits at most its rate for its subscriber', () => {
    const sent: number[] = [];
    const sender = Object.create(RTCRtpSender.prototype) as { handleRtcpPacket(p: unknown): void };
    // what werift's own handler reaches: the cache and the transport
    Object.assign(sender, { rtpCache: [], nackCount: 0, onGenericNack: { execute: () => {} }, onRtcp: { execute: () => {} }, dtlsTransport: { sendRtp: async () => {} } });
    const asked = (lost: number[]) => ({ type: 205, feedback: { count: 1, lost } });
    const packet = asked(Array.from({ length: 300 }, (_, i) => i));
    sender.handleRtcpPacket(packet);
    sent.push(packet.feedback.lost.length);
    const again = asked(Array.from({ length: 300 }, (_, i) => i));
    sender.handleRtcpPacket(again);
    sent.push(again.feedback.lost.length);
    assert.equal(sent[0]! + sent[1]!, RETRANSMIT_RATE, 'the burst, and nothing more at once');
  });

  it("the senders of one member share its retransmissions: 50 subscriptions, each NACKing a full cache, get the owner's burst, not 50 senders' (the relay sent 16,000-22,000 packets a second for 200 NACKs)", () => {
    const owner = new TokenBucket(OWNER_RETRANSMIT_RATE, OWNER_RETRANSMIT_RATE);
    let retransmitted = 0;
    for (let i = 0; i < 50; i++) {
      const sender = Object.create(RTCRtpSender.prototype) as { handleRtcpPacket(p: unknown): void };
      Object.assign(sender, { rtpCache: [], nackCount: 0, onGenericNack: { execute: () => {} }, onRtcp: { execute: () => {} }, dtlsTransport: { sendRtp: async () => {} } });
      shareRetransmissions(sender, owner);
      const packet = { type: 205, feedback: { count: 1, lost: Array.from({ length: 100 }, (_, k) => k) } };
      sender.handleRtcpPacket(packet);
      retransmitted += packet.feedback.lost.length;
    }
    // the burst, and what refilled while the loop ran; each sender's own would have let all 5,000 through
    assert.ok(retransmitted >= OWNER_RETRANSMIT_RATE && retransmitted < OWNER_RETRANSMIT_RATE * 1.2, `${retransmitted} asked to be sent again at once`);
  });

  it("a sender whose own rate is spent takes nothing more from its member's budget: the member's other subscriptions are still served", () => {
    const member = new TokenBucket(OWNER_RETRANSMIT_RATE, OWNER_RETRANSMIT_RATE);
    const make = () => {
      const sender = Object.create(RTCRtpSender.prototype) as { handleRtcpPacket(p: unknown): void };
      Object.assign(sender, { rtpCache: [], nackCount: 0, onGenericNack: { execute: () => {} }, onRtcp: { execute: () => {} }, dtlsTransport: { sendRtp: async () => {} } });
      shareRetransmissions(sender, member);
      return sender;
    };
    const noisy = make();
    for (let i = 0; i < 20; i++) noisy.handleRtcpPacket({ type: 205, feedback: { count: 1, lost: Array.from({ length: 100 }, (_, k) => k) } });
    const other = make();
    const asked = { type: 205, feedback: { count: 1, lost: [1, 2, 3] } };
    other.handleRtcpPacket(asked);
    assert.equal(asked.feedback.lost.length, 3);
  });

  it(`an SRTP context keeps state for at most ${MAX_SSRCS} SSRCs it receives: a packet of one more is dropped as unauthenticated`, () => {
    const key = Buffer.alloc(16, 1);
    const salt = Buffer.alloc(14, 2);
    const keys = { localMasterKey: key, localMasterSalt: salt, remoteMasterKey: key, remoteMasterSalt: salt };
    const sender = new SrtpSession({ keys, profile: 1 });
    const receiver = new SrtpSession({ keys, profile: 1 });
    const packet = (ssrc: number) => sender.encrypt(Buffer.alloc(20), new RtpHeader({ payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc }));
    for (let ssrc = 1; ssrc <= MAX_SSRCS; ssrc++) receiver.decrypt(packet(ssrc));
    assert.equal(receiver.decrypt(packet(1)).length > 0, true, 'a known SSRC still decrypts');
    assert.throws(() => receiver.decrypt(packet(MAX_SSRCS + 1)), { name: 'SrtpAuthenticationError' });
    // a forged packet of a new SSRC fails authentication, so it takes no place
    const other = new SrtpSession({ keys: { ...keys, localMasterKey: Buffer.alloc(16, 9) }, profile: 1 });
    const fresh = new SrtpSession({ keys, profile: 1 });
    for (let ssrc = 100; ssrc < 140; ssrc++) assert.throws(() => fresh.decrypt(other.encrypt(Buffer.alloc(20), new RtpHeader({ payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc }))));
    assert.ok(fresh.decrypt(packet(5)).length > 0, 'forged packets held no place');
  });

  it('a DTLS socket reads a bounded number of handshake messages and holds a bounded number of fragments', () => {
    const handle = (DtlsSocket.prototype as unknown as { handleFragmentHandshake(this: object, m: unknown[]): unknown[] }).handleFragmentHandshake;
    const socket = { bufferFragmentedHandshakes: [] as unknown[] };
    const fragment = (length: number, offset: number, size: number) => ({ msg_type: 1, length, message_seq: 0, fragment_offset: offset, fragment_length: size, fragment: Buffer.alloc(size) });
    assert.equal(handle.call(socket, [fragment(0xffffff, 0, 1)]).length, 0, 'a fragment claiming 16 MiB');
    for (let i = 0; i < 40; i++) handle.call(socket, [fragment(1000, 0, 10)]);
    assert.ok(socket.bufferFragmentedHandshakes.length <= MAX_BUFFERED_FRAGMENTS, `${socket.bufferFragmentedHandshakes.length} held`);
    for (let i = 0; i < MAX_HANDSHAKE_MESSAGES; i++) handle.call(socket, [fragment(10, 0, 10)]);
    assert.deepEqual(handle.call(socket, [fragment(10, 0, 10)]), [], 'past its life\'s handshake messages');
  });

  it('a receiver asks for at most 64 lost at once, modulo 2^16, one SSRC at a time', () => {
    class Handler {
      // no loop of NACKs to send here: the count alone
      closed = true;
      sendNack = async () => undefined;
      newEstSeqNum = 0;
      _lost: Record<number, number> = {};
      mediaSourceSsrc?: number;
      addPacket(_packet: unknown) {
        throw new Error('replaced');
      }
      setLost(seq: number, count: number) {
        this._lost[seq] = count;
      }
    }
    const handler = new Handler();
    boundNackHandler(handler);
    const add = (sequenceNumber: number, ssrc = 7) => handler.addPacket({ header: { sequenceNumber, ssrc } });
    const lost = () => Object.keys(handler._lost).map(Number).sort((a, b) => a - b);
    for (const seq of [65533, 65534, 1]) add(seq);
    assert.deepEqual(lost(), [0, 65535], 'a gap across the wrap');
    add(0);
    assert.deepEqual(lost(), [65535], 'a late packet is no longer asked for');
    add(65530);
    assert.deepEqual(lost(), [65535], 'one from before the estimate changes nothing');
    add(30_000);
    assert.deepEqual(lost(), [], 'a jump is a restart, not 29,999 losses');
    assert.equal(handler.newEstSeqNum, 30_000);
    add(30_100, 8);
    assert.equal(handler.newEstSeqNum, 30_000, 'another simulcast layer does not restart the count');
    add(30_003);
    assert.deepEqual(lost(), [30_001, 30_002]);
    assert.equal(handler.mediaSourceSsrc, 7);
    for (let seq = 30_005; seq < 30_005 + 3 * 200; seq += 3) add(seq);
    const held = lost();
    assert.equal(held.length, 150, 'at most 150 asked for');
    assert.equal(held.at(-1), 30_005 + 3 * 199 - 1, '...the newest');
    add(10_000);
    assert.deepEqual(lost(), [], 'far behind: the stream started again lower');
    assert.equal(handler.newEstSeqNum, 10_000);
  });

  it("a receiver's NACK loop stops once nothing is lost (werift's waited on a send that never settles when there is nothing to ask for: 200 wake-ups a second for the transport's life after one lost packet)", async () => {
    const pc = new RTCPeerConnection();
    try {
      const receiver = pc.addTransceiver('video', { direction: 'recvonly' }).receiver as unknown as { nack: { addPacket(p: unknown): void; sendNack(): Promise<void>; nackLoop?: unknown }; dtlsTransport: unknown };
      const nack = receiver.nack;
      boundNackHandler(nack);
      receiver.dtlsTransport = { sendRtcp: async () => undefined };
      let asked = 0;
      const send = nack.sendNack;
      nack.sendNack = () => (asked++, send());
      const add = (sequenceNumber: number) => nack.addPacket({ header: { sequenceNumber, ssrc: 5 } });
      for (const seq of [1, 2, 4]) add(seq);
      await new Promise((r) => setTimeout(r, 30));
      assert.ok(asked > 0, 'the lost packet was asked for');
      add(3);
      await new Promise((r) => setTimeout(r, 30));
      const after = asked;
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(asked, after, 'nothing asked once nothing is lost');
      assert.equal(nack.nackLoop, undefined, 'the loop stopped');
    } finally {
      await pc.close().catch(() => undefined);
    }
  });
});
