/**
 * Issue 11, bytes from anyone on the network to the relay's media ports: a STUN binding request
 * without the transport's credentials is not answered (a port scan finds nothing) and makes no
 * candidate pair, and a datagram that is not STUN from an address that never proved itself (a
 * plaintext DTLS alert) does not reach DTLS: a member's media goes on.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { Message, type RTCPeerConnection } from 'werift';
import { MAX_PEER_ADDRESSES, MAX_PEERS } from '../relay/media/ice-guard.ts';
import { WeriftEngine } from '../relay/media/werift-engine.ts';
import type { Room } from '../src/room.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { countPackets, fakeTrack, nodePlatform } from './media-helpers.ts';

/** A STUN binding request (RFC 5389) with a USERNAME, unsigned: what a scan or a flood sends. */
function bindingRequest(username: string): Buffer {
  const user = Buffer.from(username);
  const pad = (4 - (user.length % 4)) % 4;
  const head = Buffer.alloc(20);
  head.writeUInt16BE(0x0001, 0);
  head.writeUInt16BE(4 + user.length + pad, 2);
  head.writeUInt32BE(0x2112a442, 4);
  randomBytes(12).copy(head, 8);
  const attr = Buffer.alloc(4);
  attr.writeUInt16BE(0x0006, 0);
  attr.writeUInt16BE(user.length, 2);
  return Buffer.concat([head, attr, user, Buffer.alloc(pad)]);
}

/** A binding request signed as a client that negotiated the transport would sign it (its ufrag, its password). */
function signedRequest(ice: IceView, from: string): Buffer {
  const m = new Message(0x0001, 0x0000);
  m.setAttribute('USERNAME', `${ice.localUsername}:${from}`);
  m.setAttribute('PRIORITY', 0x7effffff);
  m.setAttribute('ICE-CONTROLLING', BigInt(1));
  m.addMessageIntegrity(Buffer.from(ice.localPassword, 'utf8'));
  m.addFingerprint();
  return m.bytes;
}

/** A plaintext DTLS 1.2 close_notify alert, epoch 0. */
const CLOSE_NOTIFY = Buffer.from([0x15, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 9, 0, 2, 1, 0]);

interface IceView {
  localUsername: string;
  localPassword: string;
  localCandidates: Array<{ port: number }>;
  checkList: unknown[];
}
const iceOf = (pc: RTCPeerConnection) => (pc.iceTransports[0] as unknown as { connection: IceView }).connection;

async function udp(): Promise<Socket> {
  const s = createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  return s;
}

describe('issue 11: the media ports take nothing from strangers', () => {
  let t: TestRelay;
  let engine: WeriftEngine;
  let b: Room;
  let count: () => number;
  let stopCamera: () => void;
  before(async () => {
    engine = new WeriftEngine({ mediaIp: '127.0.0.1' });
    t = await startTestRelay({ mediaIp: '127.0.0.1', media: engine });
    const grant = { canPublish: true, canSubscribe: true };
    const a = await t.join({ token: t.token({ roomId: 'udp', participantId: 'a', grant }), media: nodePlatform, autoSubscribe: false });
    b = await t.join({ token: t.token({ roomId: 'udp', participantId: 'b', grant }), media: nodePlatform, autoSubscribe: false });
    const camera = fakeTrack('video');
    stopCamera = () => camera.stop();
    await a.localParticipant.publish('camera', camera.track);
    await until(() => b.remoteParticipants.get('a')?.tracks.has('camera') === true, 5000, 'the camera announced');
    const publication = b.remoteParticipants.get('a')!.tracks.get('camera')!;
    await publication.subscribe();
    await until(() => !!publication.track, 5000, 'subscribed');
    count = countPackets(publication.track as never);
    await until(() => count() > 5, 5000, 'media reaches b');
  });
  after(async () => {
    stopCamera();
    await t.close();
  });

  const transports = () => [...(engine as unknown as { open: Set<RTCPeerConnection> }).open].map(iceOf);
  /** `tessera_media_datagrams_dropped_total` of `why` in the relay's /metrics. */
  const dropped = async (why: string) => {
    const text = await (await fetch(`${t.url.replace('ws', 'http')}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`tessera_media_datagrams_dropped_total{why="${why}"} `));
    assert.ok(line, `the metric of ${why} is there`);
    return Number(line.split(' ')[1]);
  };

  it('a request without the transport\'s password is not answered, even with its ufrag, whatever its method', async () => {
    const scanner = await udp();
    const answers: number[] = [];
    scanner.on('message', (_m, from) => answers.push(from.port));
    const unprovenBefore = await dropped('unproven');
    for (const ice of transports()) {
      const port = ice.localCandidates[0]!.port;
      scanner.send(bindingRequest('evil:evil'), port, '127.0.0.1');
      scanner.send(bindingRequest(`${ice.localUsername}:evil`), port, '127.0.0.1');
      // an ALLOCATE (werift answered other methods with a signed 400)
      const allocate = bindingRequest(`${ice.localUsername}:evil`);
      allocate.writeUInt16BE(0x0003, 0);
      scanner.send(allocate, port, '127.0.0.1');
    }
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(answers, [], 'no answer: a scan cannot tell the media ports');
    assert.equal((await dropped('unproven')) - unprovenBefore, transports().length * 3, 'each dropped request counted in /metrics');
    // a datagram of STUN's first bytes that is not STUN (werift would parse it): malformed
    const malformedBefore = await dropped('malformed');
    scanner.send(Buffer.from([0, 1, 0, 0]), transports()[0]!.localCandidates[0]!.port, '127.0.0.1');
    await until(async () => (await dropped('malformed')) === malformedBefore + 1, 2000, 'a malformed datagram counted');
    // the same request, signed with the transport's password, is answered: the guard is what stopped the others
    const ice = transports()[0]!;
    scanner.send(signedRequest(ice, 'probe'), ice.localCandidates[0]!.port, '127.0.0.1');
    await until(() => answers.length === 1, 2000, 'a signed request answered');
    scanner.close();
  });

  it('a plaintext DTLS alert from another address does not end a member\'s media', async () => {
    const attacker = await udp();
    for (const ice of transports()) attacker.send(CLOSE_NOTIFY, ice.localCandidates[0]!.port, '127.0.0.1');
    await new Promise((r) => setTimeout(r, 300));
    attacker.close();
    const before = count();
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(count() - before > 20, `b still receives: ${count() - before} packets in 1.5 s`);
    assert.equal(b.remoteParticipants.get('a')?.tracks.has('camera'), true);
  });

  it(`binding requests from thousands of source addresses add no candidate pair; signed ones add at most ${MAX_PEER_ADDRESSES}`, async () => {
    const target = transports()[1]!;
    const pairs = target.checkList.length;
    const port = target.localCandidates[0]!.port;
    const flood = async (request: (i: number) => Buffer) => {
      for (let i = 0; i < 1000; i += 100) {
        await Promise.all(
          Array.from({ length: 100 }, async (_, j) => {
            const s = await udp();
            await new Promise<void>((r) => s.send(request(i + j), port, '127.0.0.1', () => r()));
            s.close();
          }),
        );
      }
      await new Promise((r) => setTimeout(r, 300));
    };
    await flood((i) => bindingRequest(`${target.localUsername}:x${i}`));
    assert.equal(target.checkList.length, pairs, 'unsigned: no pair added');
    // a member that holds its own transport's password cannot grow it without bound either
    await flood((i) => signedRequest(target, `y${i}`));
    assert.ok(target.checkList.length <= pairs + MAX_PEER_ADDRESSES, `signed: ${target.checkList.length - pairs} pairs added`);
    assert.ok(target.checkList.length > pairs, 'signed requests from new addresses are taken');
    const before = count();
    await new Promise((r) => setTimeout(r, 1000));
    assert.ok(count() - before > 15, `media goes on (${MAX_PEERS} peers trusted at once, the client's own address among the last)`);
  });
});
