/**
 * Issue 11, what a member sends its own transport once it has proved its address (and holds its
 * keys): an attack review found one 32-byte RTP datagram with no key freezing the relay for
 * 192 s, one DTLS record making it allocate gigabytes, and NACKs making it retransmit hundreds of
 * thousands of packets. Real werift clients against a real relay; the attacker sends raw bytes
 * over its own nominated ICE pair, encrypted with its own keys where werift authenticates.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RTCPeerConnection } from 'werift';
import { createPolyfillRTCPeerConnection } from 'werift/polyfill';
import { WeriftEngine } from '../relay/media/werift-engine.ts';
import { MAX_SSRCS, RETRANSMIT_RATE } from '../relay/media/werift-hardening.ts';
import { Connection, RTCPeerConnection as WeriftPeer, RtpHeader } from 'werift';
import { MAX_REMOTE_CANDIDATES } from '../relay/media/remote-sdp.ts';
import type { MediaPlatform } from '../src/media/platform.ts';
import type { Room } from '../src/room.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { countPackets, fakeTrack, nodePlatform } from './media-helpers.ts';
import { rawJoin } from './raw.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The attacker's peer connections, as the SDK makes them (werift's, through its polyfill). */
const captured: RTCPeerConnection[] = [];
const Polyfill = createPolyfillRTCPeerConnection({ iceServers: [], iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'] }) as unknown as new (c?: unknown) => RTCPeerConnection;
class Capturing extends Polyfill {
  constructor(config?: unknown) {
    super(config);
    captured.push(this as unknown as RTCPeerConnection);
  }
}
const attackerPlatform: MediaPlatform = { ...nodePlatform, RTCPeerConnection: Capturing as unknown as typeof globalThis.RTCPeerConnection };

/** Raw bytes from the attacker's proven address, over its nominated pair. */
const sendRaw = (pc: RTCPeerConnection, data: Buffer) => (pc.iceTransports[0] as unknown as { connection: { send(b: Buffer): Promise<void> } }).connection.send(data);
/** RTCP encrypted with the attacker's own SRTCP keys: werift authenticates it. */
const sendSrtcp = (pc: RTCPeerConnection, rtcp: Buffer) => sendRaw(pc, (pc.dtlsTransports[0] as unknown as { srtcp: { encrypt(b: Buffer): Buffer } }).srtcp.encrypt(rtcp));

/** The longest the event loop was held while `fn` and `settleMs` after it ran (this process is the relay's). */
async function longestStall(fn: () => Promise<void>, settleMs = 500): Promise<number> {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  await fn();
  await sleep(settleMs);
  clearInterval(timer);
  return worst;
}

describe('issue 11: a member\'s own transport takes nothing werift cannot bound', () => {
  let t: TestRelay;
  let engine: WeriftEngine;
  let victim: () => number;
  let attacker: RTCPeerConnection;
  let received = 0;
  let lastSeq = 0;
  const stops: Array<() => void> = [];
  before(async () => {
    engine = new WeriftEngine({ mediaIp: '127.0.0.1' });
    t = await startTestRelay({ mediaIp: '127.0.0.1', media: engine });
    const grant = { canPublish: true, canSubscribe: true };
    const subscribe = async (room: Room) => {
      await until(() => room.remoteParticipants.get('a')?.tracks.has('camera') === true, 5000, 'the camera announced');
      const publication = room.remoteParticipants.get('a')!.tracks.get('camera')!;
      await publication.subscribe();
      await until(() => !!publication.track, 5000, 'subscribed');
      return publication.track!;
    };
    const a = await t.join({ token: t.token({ roomId: 'peer', participantId: 'a', grant }), media: nodePlatform, autoSubscribe: false });
    const camera = fakeTrack('video');
    stops.push(() => camera.stop());
    await a.localParticipant.publish('camera', camera.track);
    const b = await t.join({ token: t.token({ roomId: 'peer', participantId: 'b', grant }), media: nodePlatform, autoSubscribe: false });
    victim = countPackets((await subscribe(b)) as never);
    const x = await t.join({ token: t.token({ roomId: 'peer', participantId: 'x', grant }), media: attackerPlatform, autoSubscribe: false });
    await subscribe(x);
    attacker = captured.at(-1)!;
    await until(() => attacker.connectionState === 'connected', 5000, 'the attacker\'s transport is connected');
    const track = attacker.getTransceivers()[0]!.receiver.track as unknown as { onReceiveRtp: { subscribe(f: (p: { header: { sequenceNumber: number } }) => void): void } };
    track.onReceiveRtp.subscribe((p) => {
      received++;
      lastSeq = p.header.sequenceNumber;
    });
    await until(() => victim() > 10 && received > 10, 5000, 'media flows');
  });
  after(async () => {
    for (const stop of stops) stop();
    await t.close();
  });

  it('one RTP datagram with no key, announcing a 16,000-word header extension, is dropped before werift reads it (it held the relay 11 s)', async () => {
    const bomb = Buffer.alloc(32);
    bomb.set([0x90, 96, 0, 1, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 0xbe, 0xde, 16_000 >> 8, 16_000 & 0xff]);
    // and with a second byte of 209 (marker, payload type 81), which werift also reads as RTP
    const marked = Buffer.from(bomb);
    marked[1] = 0xd1;
    const before = victim();
    const stall = await longestStall(async () => {
      await sendRaw(attacker, bomb);
      await sendRaw(attacker, marked);
    });
    assert.ok(stall < 1000, `the event loop was held ${stall.toFixed(0)} ms`);
    await until(() => victim() > before + 5, 3000, 'the other subscriber\'s media goes on');
  });

  it('a DTLS record of handshake fragments claiming 16 MiB each is dropped: nothing is allocated for it (3.7 GiB a datagram)', async () => {
    const fragments = Array.from({ length: 200 }, (_, i) => {
      const h = Buffer.alloc(12);
      h[0] = 21 + i;
      h.writeUIntBE(0xffffff, 1, 3);
      // the last one "completes" its message: werift then assembles every type it holds
      if (i === 199) h.writeUIntBE(0xffffff, 6, 3);
      return h;
    });
    const body = Buffer.concat(fragments);
    const record = Buffer.concat([Buffer.from([22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0x10, 0, body.length >> 8, body.length & 0xff]), body]);
    const external = process.memoryUsage().external;
    const stall = await longestStall(() => sendRaw(attacker, record));
    const grown = process.memoryUsage().external - external;
    assert.ok(grown < 256 * 1024 * 1024, `external memory grew ${(grown / 1048576).toFixed(0)} MiB`);
    assert.ok(stall < 1000, `the event loop was held ${stall.toFixed(0)} ms`);
    assert.equal(attacker.connectionState, 'connected', 'the attacker\'s own transport is not even disturbed');
  });

  it(`a NACK naming the cached packets again and again makes at most ${RETRANSMIT_RATE} retransmissions (5,831 for one 1.4 KB datagram)`, async () => {
    const ssrc = Number(/a=ssrc:(\d+)/.exec((attacker.remoteDescription as unknown as { sdp: string }).sdp)![1]);
    const pairs = 340;
    const nack = Buffer.alloc(12 + 4 * pairs);
    nack.set([0x81, 205]);
    nack.writeUInt16BE(2 + pairs, 2);
    nack.writeUInt32BE(0x11111111, 4);
    nack.writeUInt32BE(ssrc, 8);
    for (let i = 0; i < pairs; i++) {
      nack.writeUInt16BE((lastSeq - 17 - 17 * (i % 6)) & 0xffff, 12 + 4 * i);
      nack.writeUInt16BE(0xffff, 14 + 4 * i);
    }
    // what the relay's senders retransmitted (the receiver's SRTP replay check drops repeats)
    const retransmitted = () =>
      [...(engine as unknown as { open: Set<RTCPeerConnection> }).open].reduce((n, pc) => n + pc.getTransceivers().reduce((m, tr) => m + (tr.sender as unknown as { retransmittedPacketsSent: number }).retransmittedPacketsSent, 0), 0);
    const before = retransmitted();
    await sendSrtcp(attacker, nack);
    await sleep(500);
    const sent = retransmitted() - before;
    assert.ok(sent > 0, 'the NACK was read: some packets are sent again');
    assert.ok(sent <= RETRANSMIT_RATE, `${sent} retransmissions`);
  });

  it(`RTP of a new SSRC in every packet, encrypted with the member's keys, keeps state for at most ${MAX_SSRCS} SSRCs (700k SSRCs: 600 MiB and second-long stalls)`, async () => {
    const srtp = (attacker.dtlsTransports[0] as unknown as { srtp: { encrypt(payload: Buffer, header: RtpHeader): Buffer } }).srtp;
    for (let i = 0; i < 300; i++) {
      await sendRaw(attacker, srtp.encrypt(Buffer.alloc(40), new RtpHeader({ payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc: 0x5000_0000 + i })));
      if (i % 50 === 49) await sleep(20);
    }
    await sleep(300);
    const held = [...(engine as unknown as { open: Set<RTCPeerConnection> }).open].map(
      (pc) => Object.keys((pc.dtlsTransports[0] as unknown as { srtp?: { remoteContext: { srtpSSRCStates: object } } }).srtp?.remoteContext.srtpSSRCStates ?? {}).length,
    );
    assert.ok(Math.max(...held) <= MAX_SSRCS, `SSRC states held per transport: ${held.join(', ')}`);
    assert.ok(Math.max(...held) > 0, 'the transports do keep the SSRCs they use');
  });

  it(`an answer of 960 candidates, names among them, reaches werift with at most ${MAX_REMOTE_CANDIDATES} IP literals: no mDNS lookup, no quadratic pairing (each held the relay ~400 ms)`, async () => {
    const proto = Connection.prototype as unknown as { addRemoteCandidate(c?: { host: string }): Promise<void> };
    const original = proto.addRemoteCandidate;
    const hosts: string[] = [];
    const viewer = await rawJoin(t.url, t.token({ roomId: 'peer', grant: { canSubscribe: true }, isViewer: true }));
    const client = new WeriftPeer({ iceAdditionalHostAddresses: ['127.0.0.1'], iceUseIpv6: false });
    try {
      const sub = (await viewer.request('media.subscribe', { participantId: 'a', source: 'camera' })).result as { subscriptionId: string; sdp: string };
      await client.setRemoteDescription({ type: 'offer', sdp: sub.sdp });
      await client.setLocalDescription(await client.createAnswer());
      const own = client.localDescription!.sdp.replace(/\r\n$/, '').split('\r\n');
      const extra = Array.from({ length: 960 - own.filter((l) => l.startsWith('a=candidate:')).length }, (_, i) =>
        `a=candidate:${i} 1 udp ${2_000_000_000 - i} ${i % 2 ? `n${i}.local` : `10.${(i >> 8) & 255}.${i & 255}.1`} ${1024 + i} typ host`,
      );
      const sdp = [...own, ...extra].join('\r\n') + '\r\n';
      // from here only the relay takes remote candidates (this test's own client has its)
      proto.addRemoteCandidate = function (this: unknown, c?: { host: string }) {
        if (c) hosts.push(c.host);
        return original.call(this, c);
      };
      const stall = await longestStall(async () => {
        const answered = await viewer.request('media.answer', { subscriptionId: sub.subscriptionId, sdp });
        assert.equal(answered.error, undefined);
      });
      assert.ok(hosts.length > 0 && hosts.length <= MAX_REMOTE_CANDIDATES, `candidates werift was given: ${hosts.length}`);
      assert.ok(hosts.every((h) => !h.includes('.local')), 'no name reached werift');
      assert.ok(stall < 200, `the event loop was held ${stall.toFixed(0)} ms`);
      // the member's own candidates came first: its transport connects
      await until(() => client.connectionState === 'connected', 10_000, 'the viewer\'s transport connects');
      // an answer again: refused before werift parses it (werift parsed each, then refused it for its state)
      const again = await viewer.request('media.answer', { subscriptionId: sub.subscriptionId, sdp });
      assert.equal((again.error as { reason?: string } | undefined)?.reason, 'bad-sdp');
      assert.match((again.error as { message: string }).message, /answered already/);
      assert.equal(client.connectionState, 'connected', 'the transport lives on');
      // answers sent together: werift awaits before its state changes, so each found it unchanged and was parsed
      const other = new WeriftPeer({ iceAdditionalHostAddresses: ['127.0.0.1'], iceUseIpv6: false });
      try {
        const sub2 = (await viewer.request('media.subscribe', { participantId: 'a', source: 'camera' })).result as { subscriptionId: string; sdp: string };
        await other.setRemoteDescription({ type: 'offer', sdp: sub2.sdp });
        await other.setLocalDescription(await other.createAnswer());
        const together = await Promise.all(Array.from({ length: 4 }, () => viewer.request('media.answer', { subscriptionId: sub2.subscriptionId, sdp: other.localDescription!.sdp })));
        const refusals = together.map((a) => (a.error as { message?: string } | undefined)?.message ?? 'applied');
        assert.equal(refusals.filter((m) => m === 'applied').length, 1, refusals.join(' | '));
        assert.equal(refusals.filter((m) => /answered already/.test(m)).length, 3, refusals.join(' | '));
      } finally {
        await other.close();
      }
    } finally {
      proto.addRemoteCandidate = original;
      await client.close();
      viewer.ws.close();
    }
  });
});
