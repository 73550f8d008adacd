/**
 * Issue 14 and 15: output files on a cluster. Each node keeps the recordings and HLS runs it
 * wrote on its own disk; any node answers for them (it asks the others over HTTP with the
 * caller's token). Three nodes on a real Redis, real ffmpeg outputs of a room without media.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KeyStore } from '../relay/token/keys.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { filesPassing, PEER_HEADER, peerProof } from '../relay/http-peers.ts';
import { get as httpGet, type ClientRequest } from 'node:http';
import { downloadPool } from '../relay/send-file.ts';
import { clusterKey } from '../relay/cluster/bus.ts';
import { Redis } from 'ioredis';
import { mintToken, type MintOptions } from '../src/server/mint.ts';
import type { Room } from '../src/room.ts';
import { Sdk } from '../src/sdk.ts';
import { until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';

const API_KEY = 'files-key';
const SECRET = 'files-secret-files-secret-files-32';
const grant = { canRecord: true, canHls: true, canSubscribe: true, canModerate: true };

interface Listing {
  recordings: Array<{ recording: string; file: string; size: number; url: string }>;
  unreachable?: number;
}

describe('recordings and HLS through any node of three', () => {
  let redis: TestRedis;
  let nodes: Relay[];
  const dir = mkdtempSync(join(tmpdir(), 'tessera-cluster-files-'));
  const rooms: Room[] = [];
  const token = (claims: Omit<MintOptions, 'apiKey' | 'secret'>) => mintToken({ apiKey: API_KEY, secret: SECRET, ...claims });
  const http = (node: number) => nodes[node]!.url.replace(/^ws/, 'http');
  const join_ = async (node: number, roomId: string, participantId: string) => {
    const room = await Sdk.join({ url: nodes[node]!.url, token: token({ roomId, participantId, grant }), name: participantId });
    rooms.push(room);
    return room;
  };
  const homeOf = (roomId: string) => nodes.findIndex((n) => n.context.rooms.get('acme', roomId));
  const get = (node: number, path: string, bearer?: string, headers: Record<string, string> = {}) =>
    fetch(`${http(node)}${path}`, { headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...headers } });
  const list = async (node: number, bearer: string): Promise<Listing> => {
    const res = await get(node, '/recordings', bearer);
    assert.equal(res.status, 200, `listing through node ${node}`);
    return (await res.json()) as Listing;
  };
  const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
  const reader = token({ roomId: 'studio', participantId: 'reader', grant: { canRecord: true } });

  before(async () => {
    redis = await startRedis();
    nodes = await Promise.all(
      [0, 1, 2].map((i) => {
        const keys = new KeyStore();
        keys.replaceProjects({ acme: { keys: { [API_KEY]: SECRET }, revoked: [] } });
        // a small share of plain HTTP sockets per address: the nodes' own requests to each other
        // (all from 127.0.0.1, more than 9 at once below) are never refused theirs
        return startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, media: null, recordingsDir: join(dir, `rec-${i}`), hlsDir: join(dir, `hls-${i}`), httpSocketsPerAddress: 9 });
      }),
    );
  });
  after(async () => {
    try {
      for (const room of rooms) void room.leave().catch(() => undefined);
      await Promise.all(nodes.map((n) => n.close()));
      await redis.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  let first: { recording: string; composite: string };

  it('a live HLS run written by the home plays through the other nodes (ffprobe: H.264 + AAC)', async () => {
    const host = await join_(0, 'studio', 'host');
    assert.equal(homeOf('studio'), 0);
    const hls = await host.hls.start({ segmentSeconds: 1 });
    const playlist = hls.info!.playlist!;
    for (const node of [1, 2]) {
      const res = await get(node, playlist);
      assert.equal(res.status, 200, `the playlist through node ${node}`);
      assert.equal(res.headers.get('content-type'), 'application/vnd.apple.mpegurl');
      assert.match(await res.text(), /#EXTM3U/);
    }
    // ffprobe reads the live playlist and its segments through node 2 (the nodes run in this process: not a sync spawn)
    const { stdout: streams } = await promisify(execFile)('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name', '-of', 'csv=p=0', `${http(2)}${playlist}`], { encoding: 'utf8', timeout: 20_000 });
    assert.deepEqual([...new Set(streams.split('\n').map((l) => l.trim()).filter(Boolean))].sort(), ['aac', 'h264']);
    // a player asks every second or two for hours: each passed answer gives its place back
    for (let i = 0; i < 300; i++) {
      const res = await get(1, playlist, undefined, i % 2 ? {} : { range: 'bytes=0-1' });
      assert.equal(res.status, 200, `request ${i}`);
      await res.arrayBuffer();
    }
    assert.equal((await fetch(`${http(1)}${playlist}`, { method: 'HEAD' })).status, 200);
    // a file of no run is still 404 everywhere, and a passed request is never passed on
    assert.equal((await get(1, playlist.replace(/\/hls\/[0-9a-f]{32}\//, `/hls/${'0'.repeat(32)}/`))).status, 404);
    const client = new Redis(redis.url);
    try {
      const key = Buffer.from((await client.get(clusterKey('peer-key')))!, 'base64url');
      const missing = playlist.replace(/index\.m3u8$/, 'nothing.m3u8');
      assert.equal((await get(1, missing, undefined, { [PEER_HEADER]: peerProof(key, 'GET', missing) })).status, 404, 'a passed request is answered from local files only');
      // a request that says a node passed it is never passed on again, proof or not (nodes whose
      // keys differed for a moment passed one listing round three nodes 679 times): without a
      // proof it is a client's, answered from this node's files only
      assert.equal((await get(1, playlist, undefined, { [PEER_HEADER]: '1' })).status, 404);
      assert.equal((await get(1, playlist)).status, 200, 'without the header it is passed on');
    } finally {
      client.disconnect();
    }
    await host.hls.stop();
  });

  it('downloads passed between nodes: each client has its share of places at the node it asked, not one share for the whole cluster; a forged peer header is no header', async () => {
    // an HLS run that node 0 wrote, with a segment large enough to stay open while unread
    const run = 'ab'.repeat(16);
    mkdirSync(join(dir, 'hls-0', run), { recursive: true });
    writeFileSync(join(dir, 'hls-0', run, 'seg0.ts'), Buffer.alloc(16 * 1024 * 1024));
    const client = new Redis(redis.url);
    const http0 = http(0);
    const bases = await client.hgetall(clusterKey('http'));
    await client.set(clusterKey('file', 'hls', run), Object.keys(bases).find((node) => bases[node] === http0)!);
    client.disconnect();
    const path = `/hls/${run}/seg0.ts`;
    const held: ClientRequest[] = [];
    /** A download from `from` (a loopback address of its own) through `node`; kept open unread if `hold`. */
    const download = (node: number, from: string, headers: Record<string, string> = {}, hold = false) =>
      new Promise<number>((resolve, reject) => {
        const req = httpGet(`${http(node)}${path}`, { localAddress: from, agent: false, headers }, (res) => {
          if (hold && res.statusCode === 200) res.pause();
          else res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        if (hold) held.push(req);
      });
    try {
      // one client through node 1 with 8 downloads it does not read: its own share is spent there...
      for (let i = 0; i < 8; i++) assert.equal(await download(1, '127.0.0.2', {}, true), 200);
      assert.equal(await download(1, '127.0.0.2'), 503, 'its ninth');
      // ...and nobody else's, through any node
      for (const [node, from] of [[1, '127.0.0.3'], [1, '127.0.0.4'], [2, '127.0.0.5'], [0, '127.0.0.6']] as const) assert.equal(await download(node, from), 200, `${from} through node ${node}`);
      // a client at node 0 claiming to be a node has its own share, as any client
      for (let i = 0; i < 8; i++) assert.equal(await download(0, '127.0.0.7', { [PEER_HEADER]: '1' }, true), 200);
      assert.equal(await download(0, '127.0.0.7', { [PEER_HEADER]: '1' }), 503);
      for (const from of ['127.0.0.8', '127.0.0.9']) assert.equal(await download(1, from), 200, `${from} through node 1 while the forger holds its places`);
      // node 0 now holds over 9 plain sockets from the nodes' address (127.0.0.1), its share for a
      // client: downloads passed on with a proof are never refused theirs
      for (const from of ['127.0.0.10', '127.0.0.11', '127.0.0.12']) assert.equal(await download(1, from, {}, true), 200, `${from} through node 1, past the nodes' address's share at node 0`);
    } finally {
      for (const req of held) req.destroy();
      rmSync(join(dir, 'hls-0', run), { recursive: true, force: true });
    }
  });

  it('a recording made on one node is listed and downloaded, byte for byte, through another', async () => {
    const host = rooms[0]!;
    await host.recording.start();
    await new Promise((r) => setTimeout(r, 1500));
    const stopped = await host.recording.stop();
    assert.ok(stopped.info?.files?.some((f) => f.name === 'composite.mp4' && f.size > 0));
    const here = await list(0, reader);
    const composite = here.recordings.find((r) => r.file === 'composite.mp4')!;
    first = { recording: composite.recording, composite: composite.url };
    for (const node of [1, 2]) assert.deepEqual((await list(node, reader)).recordings, here.recordings, `the same listing through node ${node}`);
    const onDisk = readFileSync(join(dir, 'rec-0', 'acme', 'studio', composite.recording, 'composite.mp4'));
    const res = await get(2, composite.url, reader);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'video/mp4');
    assert.equal(Number(res.headers.get('content-length')), onDisk.length);
    assert.equal(sha(new Uint8Array(await res.arrayBuffer())), sha(onDisk));
    // the token is checked at both ends: none, or one of another room, reads nothing
    assert.equal((await get(2, composite.url)).status, 401);
    assert.equal((await get(2, composite.url, token({ roomId: 'other', participantId: 'x', grant: { canRecord: true } }))).status, 404);
    assert.deepEqual((await list(1, token({ roomId: 'other', participantId: 'x', grant: { canRecord: true } }))).recordings, []);
  });

  it('downloads pipelined through another node give back their places there and at the home when their socket closes before their turn', async () => {
    // a file larger than the sockets' buffers: the first download stays in flight, the second queued behind it
    writeFileSync(join(dir, 'rec-0', 'acme', 'studio', first.recording, 'big--camera.webm'), Buffer.alloc(64 * 1024 * 1024, 3), { mode: 0o600 });
    const path = first.composite.replace('composite.mp4', 'big--camera.webm');
    const get = `GET ${path} HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer ${reader}\r\n\r\n`;
    const homePool = downloadPool(nodes[0]!.context, 'recordings');
    for (let round = 0; round < 3; round++) {
      const socket = connect(Number(new URL(http(2)).port), '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((r) => socket.once('connect', r));
      socket.pause();
      socket.write(get + get);
      await until(() => filesPassing() === 2, 5000, 'both downloads passed on (the second waiting behind the first)');
      socket.destroy();
      await until(() => filesPassing() === 0, 5000, `round ${round}: node 2's places given back`);
      await until(() => homePool.inUse === 0, 5000, `round ${round}: the home's places given back`);
    }
  });

  it("a room recorded on two homes lists both recordings, newest first, through the third; a removal at the room's new home holds at the old one", async () => {
    await rooms[0]!.leave();
    const client = new Redis(redis.url);
    try {
      await until(async () => homeOf('studio') === -1 && (await client.exists(clusterKey('home', 'acme', 'studio'))) === 0, 5000, "the room closed and its lease released");
    } finally {
      client.disconnect();
    }
    const host = await join_(1, 'studio', 'host2');
    assert.equal(homeOf('studio'), 1);
    await host.recording.start();
    await new Promise((r) => setTimeout(r, 1500));
    await host.recording.stop();
    const listed = await list(2, reader);
    const ids = [...new Set(listed.recordings.map((r) => r.recording))];
    assert.equal(ids.length, 2);
    assert.equal(ids[1], first.recording, 'the older recording second');
    for (const node of [0, 1, 2]) {
      for (const entry of listed.recordings.filter((r) => r.file === 'composite.mp4')) assert.equal((await get(node, entry.url, reader)).status, 200, `${entry.recording} through node ${node}`);
    }
    // a reader with canRecord in the room, removed by the moderator at node 1
    const removedToken = token({ roomId: 'studio', participantId: 'leaker', grant: { canRecord: true } });
    const leaker = await Sdk.join({ url: nodes[2]!.url, token: removedToken, name: 'leaker' });
    assert.equal((await get(0, first.composite, removedToken)).status, 200, 'before the removal');
    const gone = new Promise((resolve) => leaker.on('disconnected', resolve));
    await host.remove('leaker');
    await gone;
    for (const node of [0, 1, 2]) {
      assert.equal((await get(node, first.composite, removedToken)).status, 403, `the removed token through node ${node}`);
      assert.equal((await get(node, '/recordings', removedToken)).status, 403);
      // as a request another node passed on (the header is the caller's to forge)
      assert.equal((await get(node, first.composite, removedToken, { [PEER_HEADER]: '1' })).status, 403, `the removed token as a peer through node ${node}`);
    }
  });

  it('a node that leaves takes its files with it: the others list and serve what is left', async () => {
    await nodes[0]!.close();
    // nodes reuse their list of the others for a second
    let listed = await list(2, reader);
    await until(async () => (listed = await list(2, reader)).unreachable === undefined, 3000, 'the node that left no longer asked');
    assert.ok(!listed.recordings.some((r) => r.recording === first.recording), "node 0's recording is gone with it");
    assert.equal(listed.recordings.filter((r) => r.file === 'composite.mp4').length, 1);
    assert.equal((await get(2, first.composite, reader)).status, 404);
  });
});
