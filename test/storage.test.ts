import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, lchownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DEFAULTS } from '../relay/config.ts';
import { createLogger } from '../relay/log.ts';
import type { Room } from '../src/room.ts';
import type { TappedTrack } from '../relay/media/board.ts';
import type { OutputContext } from '../relay/outputs/board.ts';
import { RecordingProvider } from '../relay/outputs/recording.ts';
import { encodeId, listRecordingFiles, privateRoot, UnsafeStorageError } from '../relay/outputs/storage.ts';
import { Timeline } from '../relay/rooms/timeline.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { tokenKey } from '../relay/token/identity.ts';
import { mintToken } from '../src/server/mint.ts';
import { rejectsWith, startTestRelay, type TestRelay } from './helpers.ts';
import { rawHttp, request } from './fuzz/http.ts';

type Listing = { recordings: Array<{ recording: string; file: string; url: string }> };

describe('issue 11: storage — one private directory per project and room, exact ownership', () => {
  let t: TestRelay;
  let dir: string;
  const http = (target: string, token?: string) => rawHttp(t.relay.port, request(target, token ? { Authorization: `Bearer ${token}` } : {}));
  const reader = (roomId: string) => t.token({ roomId, grant: { canRecord: true } });
  const list = async (token: string) => JSON.parse((await http('/recordings', token)).body.toString()) as Listing;
  /** The recordings of a listing (it lists each one's files: composite, timeline, tracks). */
  const ids = (listing: Listing) => [...new Set(listing.recordings.map((r) => r.recording))];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tessera-storage-'));
    t = await startTestRelay({ recordingsDir: join(dir, 'rec'), hlsDir: join(dir, 'hls') });
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function record(relay: TestRelay, roomId: string, token = relay.token({ roomId, participantId: 'host', grant: { canRecord: true } })): Promise<string> {
    const host = await relay.join({ token });
    const status = await host.recording.start();
    await host.recording.stop();
    await host.leave();
    return status.info!.recording!;
  }

  it('ids are encoded injectively into one safe path segment', () => {
    const ids = ['acme', 'acme--board', 'team_alpha', 'team.alpha', 'Team.alpha', 'a.b', 'a_b', 'a_2eb', '_', '', '..', '.', 'a/b', 'a\\b', 'é', 'e\u0301', '\ud800', '\ufffd', 'x'.repeat(151), 'x'.repeat(152), 'CON', 'nul'];
    const encoded = ids.map(encodeId);
    assert.equal(new Set(encoded).size, ids.length, 'no two ids share a name');
    for (const e of encoded) assert.match(e, /^(?:[a-z0-9_-]{1,150}|~[0-9a-f]{64})$/);
    assert.equal(encodeId('team_alpha'), 'team_5falpha');
    assert.equal(encodeId('team.alpha'), 'team_2ealpha');
    assert.equal(encodeId('Team'), '_54eam', 'upper case is escaped: case-insensitive filesystems keep them apart');
  });

  it("item 13: room acme's token never sees acme--board's recordings", async () => {
    const board = await record(t, 'acme--board');
    const mine = await record(t, 'acme');
    assert.deepEqual(ids(await list(reader('acme'))), [mine]);
    assert.equal((await http(`/recordings/${board}/timeline.jsonl`, reader('acme'))).status, 404);
    assert.equal((await http(`/recordings/${board}/timeline.jsonl`, reader('acme--board'))).status, 200);
  });

  it("item 13: team_alpha never reads team.alpha's recordings", async () => {
    const dot = await record(t, 'team.alpha');
    assert.deepEqual((await list(reader('team_alpha'))).recordings, []);
    assert.equal((await http(`/recordings/${dot}/timeline.jsonl`, reader('team_alpha'))).status, 404);
    assert.deepEqual(ids(await list(reader('team.alpha'))), [dot]);
  });

  it('item 13: participants a.b and a_b write different track files; a second publication of a source gets --2, never overwrites', async () => {
    const root = join(dir, 'tracks');
    const track = (participantId: string, source: 'camera' | 'microphone'): TappedTrack => ({
      participantId,
      source,
      kind: source === 'camera' ? 'video' : 'audio',
      record: async (path) => {
        writeFileSync(path, `${participantId} ${source} ${Math.random()}`);
        return { stop: async () => undefined };
      },
      rtp: () => () => undefined,
      requestKeyFrame: () => undefined,
      // silent: the composite shows the room card (its media is tested in test/recording-hls.test.ts)
      flowing: () => false,
    });
    const tracks = [track('a.b', 'camera'), track('a_b', 'camera'), track('a_b', 'camera'), track('A_B', 'camera')];
    const ctx: OutputContext = {
      project: 'default',
      roomId: 'tracks',
      timeline: new Timeline(),
      log: createLogger('silent'),
      nameOf: (id) => id,
      broadcast: () => undefined,
      broadcastLazy: () => undefined,
      broadcastRaw: () => undefined,
      broadcastSplit: () => undefined,
      tapMedia: (tap) => {
        for (const tr of tracks) tap(tr);
        return () => undefined;
      },
    };
    const provider = new RecordingProvider(ctx, root, () => undefined, { owner: {} });
    const info = await provider.start();
    await new Promise((r) => setTimeout(r, 50));
    await provider.stop();
    const files = readdirSync(join(root, 'default', 'tracks', info.recording!)).sort();
    assert.deepEqual(files, ['_41_5f_42--camera.webm', 'a_2eb--camera.webm', 'a_5fb--camera--2.webm', 'a_5fb--camera.webm', 'composite.mp4', 'timeline.jsonl']);
    const contents = files.filter((f) => f.endsWith('.webm')).map((f) => readFileSync(join(root, 'default', 'tracks', info.recording!, f), 'utf8'));
    assert.equal(new Set(contents).size, 4, 'four files, four recordings');
  });

  it('item 13: rooms whose names normalise alike do not delete each other\'s HLS', async () => {
    const a = await t.join({ token: t.token({ roomId: 'h.1', participantId: 'host', grant: { canHls: true } }) });
    const b = await t.join({ token: t.token({ roomId: 'h_1', participantId: 'host', grant: { canHls: true } }) });
    const kept = (await a.hls.start()).info!.playlist!;
    const first = (await b.hls.start()).info!.playlist!;
    await b.hls.stop();
    const second = (await b.hls.start()).info!.playlist!;
    assert.notEqual(first, second, 'a new run, a new URL');
    assert.equal((await http(kept)).status, 200, "the other room's HLS stays");
    assert.equal((await http(second)).status, 200);
    assert.equal((await http(first)).status, 404, "a restart deletes the room's own previous run");
    await a.hls.stop();
    await b.hls.stop();
    await a.leave();
    await b.leave();
  });

  it("item 14: two projects with the same room id don't see each other's recordings", async () => {
    const keys = new KeyStore();
    keys.replaceProjects({ p1: { keys: { k1: 'secret-1-0123456789' }, revoked: [] }, p2: { keys: { k2: 'secret-2-0123456789' }, revoked: [] } });
    const two = await startTestRelay({ keys, recordingsDir: join(dir, 'projects'), hlsDir: join(dir, 'projects-hls') });
    try {
      const token = (apiKey: string, secret: string, grant = { canRecord: true }, participantId?: string) => mintToken({ apiKey, secret, roomId: 'shared', grant, ...(participantId ? { participantId } : {}) });
      const r1 = await record(two, 'shared', token('k1', 'secret-1-0123456789', { canRecord: true }, 'host'));
      const r2 = await record(two, 'shared', token('k2', 'secret-2-0123456789', { canRecord: true }, 'host'));
      const get = (target: string, tk: string) => rawHttp(two.relay.port, request(target, { Authorization: `Bearer ${tk}` }));
      const seen = async (tk: string) => ids(JSON.parse((await get('/recordings', tk)).body.toString()) as Listing);
      assert.deepEqual(await seen(token('k1', 'secret-1-0123456789')), [r1]);
      assert.deepEqual(await seen(token('k2', 'secret-2-0123456789')), [r2]);
      assert.equal((await get(`/recordings/${r2}/timeline.jsonl`, token('k1', 'secret-1-0123456789'))).status, 404);
      assert.equal((await get(`/recordings/${r1}/timeline.jsonl`, token('k2', 'secret-2-0123456789'))).status, 404);
      assert.deepEqual(readdirSync(join(dir, 'projects')).sort(), ['p1', 'p2']);
    } finally {
      await two.close();
    }
  });

  it("item 17: a token that must ask (waiting or denied) and a removed token download no recordings", async () => {
    const id = await record(t, 'guarded');
    const ask = t.token({ roomId: 'guarded', grant: { canRecord: true }, joinPolicy: { mode: 'ask' } });
    assert.equal((await http('/recordings', ask)).status, 403);
    assert.equal((await http(`/recordings/${id}/timeline.jsonl`, ask)).status, 403);
    const removed = reader('guarded');
    t.relay.context.bans.add('default', 'guarded', tokenKey(removed, { iss: 'test-key' }), Date.now() / 1000 + 3600);
    assert.equal((await http('/recordings', removed)).status, 403);
    assert.equal((await http(`/recordings/${id}/timeline.jsonl`, removed)).status, 403);
    // another spelling of the same signature is the same token
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(removed.at(-1)!);
    const respelt = removed.slice(0, -1) + alphabet[last ^ 1];
    assert.equal((await http('/recordings', respelt)).status, 403);
    const fresh = t.token({ roomId: 'guarded', participantId: 'another-reader', grant: { canRecord: true } });
    assert.equal((await http('/recordings', fresh)).status, 200, 'another token of the room reads');
    assert.equal((await http('/recordings', t.token({ grant: {} }))).status, 403, 'a domain-wide token reads no room');
  });

  /** `count` finished recordings of `roomId` (project `default`) made by hand under `root`, each with `files` track files beside its timeline. */
  function plantRecordings(root: string, roomId: string, count: number, files = 0): string[] {
    const made: string[] = [];
    for (let i = 0; i < count; i++) {
      const id = `2026-01-01T00-${String(Math.floor(i / 60)).padStart(2, '0')}-${String(i % 60).padStart(2, '0')}Z-abcdefgh`;
      const path = join(root, encodeId('default'), encodeId(roomId), id);
      mkdirSync(path, { recursive: true, mode: 0o700 });
      writeFileSync(join(path, 'timeline.jsonl'), '{}\n');
      for (let f = 1; f <= files; f++) writeFileSync(join(path, `host--camera${f > 1 ? `--${f}` : ''}.webm`), 'x');
      made.push(id);
    }
    return made;
  }

  it("a listing of recordings pays its bytes from the token's byte budget: asked in a loop it is refused RATE_LIMITED (byte-rate), another token is not held back", async () => {
    const root = join(dir, 'listing-budget');
    plantRecordings(root, 'listed', 20);
    const tight = await startTestRelay({ dataByteRate: 1024, dataByteBurst: 4096, recordingsDir: root, hlsDir: join(dir, 'listing-budget-hls') });
    try {
      const get = (tk: string) => rawHttp(tight.relay.port, request('/recordings', { Authorization: `Bearer ${tk}` }));
      const token = tight.token({ roomId: 'listed', participantId: 'looper', grant: { canRecord: true } });
      const first = await get(token);
      assert.equal(first.status, 200);
      assert.equal(ids(JSON.parse(first.body.toString()) as Listing).length, 20, 'a listing of ~3.4 KB is answered from a 4 KiB burst');
      let refused: Awaited<ReturnType<typeof get>> | null = null;
      for (let i = 0; i < 50 && !refused; i++) {
        const res = await get(token);
        if (res.status !== 200) refused = res;
      }
      assert.ok(refused, 'listings in a loop are refused once their bytes pass the budget');
      assert.equal(refused.status, 429);
      const body = JSON.parse(refused.body.toString()) as { error: { code: string; kind: string; reason: string; message: string } };
      assert.deepEqual({ ...body.error, message: '' }, { code: 'RATE_LIMITED', kind: 'Request', reason: 'byte-rate', message: '' });
      assert.match(body.error.message, /try again in \d+ s/);
      assert.ok(Number(refused.headers['retry-after']) >= 1, 'it says when to come back');
      const other = tight.token({ roomId: 'listed', participantId: 'someone-else', grant: { canRecord: true } });
      assert.equal((await get(other)).status, 200, "another token's listings are paid from its own budget");
    } finally {
      await tight.close();
    }
  });

  it('a listing reads a bounded number of directory entries: of the room (a directory each start makes) and of its recordings (a file each publication makes)', async () => {
    const root = join(dir, 'listing-bounds');
    plantRecordings(root, 'many', 30, 2);
    const all = await listRecordingFiles(root, 'default', 'many');
    assert.equal(all.files.length, 90, 'within the limits: every file of every recording');
    assert.equal(all.truncated, false);
    const fewRecordings = await listRecordingFiles(root, 'default', 'many', { roomEntries: 10, files: 1000 });
    assert.ok(new Set(fewRecordings.files.map((f) => f.recording)).size <= 10, 'at most the room entries read');
    assert.equal(fewRecordings.truncated, true);
    const fewFiles = await listRecordingFiles(root, 'default', 'many', { roomEntries: 1000, files: 20 });
    assert.ok(fewFiles.files.length <= 20, `at most the file entries read (${fewFiles.files.length})`);
    assert.ok(fewFiles.files.length > 0);
    assert.equal(fewFiles.truncated, true);
  });

  it('item 18: HLS captions carry stage events only: no chat messages, no streams, no viewers; names cannot forge cues', async () => {
    const host = await t.join({ token: t.token({ roomId: 'stage', participantId: 'host', grant: { canHls: true, canPublishData: true, canWhiteboard: true } }) });
    const playlist = (await host.hls.start({ segmentSeconds: 0.5 })).info!.playlist!;
    const viewer = await t.join({ token: t.token({ roomId: 'stage', participantId: 'quiet-viewer', isViewer: true, grant: {} }) });
    const speaker = await t.join({ token: t.token({ roomId: 'stage', participantId: 'eve', grant: {} }), name: 'Eve --> 00:00:09.000 <b>forged</b>' });
    await host.pubsub.publish('chat', 'secret chat line');
    await host.pubsub.publish('chat', 'private line', { to: ['eve'] });
    await host.whiteboard.start();
    await host.whiteboard.draw({ kind: 'rect', x: 0, y: 0, w: 1, h: 1 });
    await viewer.leave();
    await speaker.leave();
    await new Promise((r) => setTimeout(r, 700));
    await host.hls.stop();
    const subtitles = playlist.replace('index.m3u8', 'subs.m3u8');
    const text = (await http(subtitles)).body.toString();
    const segments = [...text.matchAll(/^(sub\d+\.vtt)$/gm)].map((m) => m[1]!);
    const vtt = (await Promise.all(segments.map(async (s) => (await http(playlist.replace('index.m3u8', s))).body.toString()))).join('\n');
    assert.match(vtt, /joined the stage/);
    assert.match(vtt, /eve left the stage/);
    assert.match(vtt, /whiteboard active/);
    assert.match(vtt, /host drew on the whiteboard/);
    assert.doesNotMatch(vtt, /secret chat line|private line/, 'no pubsub messages');
    assert.doesNotMatch(vtt, /quiet-viewer/, 'the audience is not the stage');
    for (const line of vtt.split('\n').filter((l) => l.includes('-->'))) assert.match(line, /^\d\d:\d\d:\d\d\.\d{3} --> \d\d:\d\d:\d\d\.\d{3}$/, `a cue timing line, not ${line}`);
    assert.doesNotMatch(vtt, /<b>/);
    await host.leave();
  });

  it('item 19: the default directories are private ones under the home directory, not a shared temp dir', async () => {
    for (const d of [DEFAULTS.recordingsDir, DEFAULTS.hlsDir]) {
      assert.ok(d.startsWith(join(homedir(), '.tessera')), d);
      assert.ok(!d.startsWith(tmpdir()), d);
    }
    const fresh = join(dir, 'fresh', 'deep', 'root');
    await privateRoot(fresh);
    for (const p of [join(dir, 'fresh'), join(dir, 'fresh', 'deep'), fresh]) assert.equal(statSync(p).mode & 0o777, 0o700, p);
  });

  it('item 19: a symlink planted at the root or on the way, a 0777 directory and a foreign-owned one are refused', async () => {
    const victim = join(dir, 'victim');
    mkdirSync(victim, { mode: 0o700 });
    symlinkSync(victim, join(dir, 'link'));
    const open = join(dir, 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    const refused = [join(dir, 'link'), open, join(open, 'sub')];
    if (process.getuid?.() === 0) {
      // a link on the way is followed only if root or the relay's own user made it
      const planted = join(dir, 'planted');
      symlinkSync(victim, planted);
      lchownSync(planted, 65534, 65534);
      refused.push(join(planted, 'sub'));
      const foreign = join(dir, 'foreign');
      mkdirSync(foreign, { mode: 0o755 });
      chownSync(foreign, 65534, 65534);
      refused.push(foreign, join(foreign, 'sub'));
    }
    for (const root of refused) {
      await assert.rejects(privateRoot(root), UnsafeStorageError, root);
      // (recordings and HLS in one directory are refused at start: each root is tried for each)
      for (const [dirs, start] of [
        [{ recordingsDir: root, hlsDir: join(dir, 'apart-hls') }, (host: Room) => host.recording.start()],
        [{ recordingsDir: join(dir, 'apart-rec'), hlsDir: root }, (host: Room) => host.hls.start()],
      ] as const) {
        const relay = await startTestRelay(dirs);
        try {
          const host = await relay.join({ token: relay.token({ roomId: 'r', grant: { canRecord: true, canHls: true } }) });
          assert.equal((await rejectsWith(start(host), 'INTERNAL_ERROR')).reason, 'unsafe-storage');
        } finally {
          await relay.close();
        }
      }
    }
    assert.deepEqual(readdirSync(victim), [], 'nothing written through the link');
    // a directory inside the root replaced by a link is refused too
    const root = join(dir, 'inner');
    await privateRoot(root);
    symlinkSync(victim, join(root, 'default'));
    const relay = await startTestRelay({ recordingsDir: root });
    try {
      const host = await relay.join({ token: relay.token({ roomId: 'r', grant: { canRecord: true } }) });
      assert.equal((await rejectsWith(host.recording.start(), 'INTERNAL_ERROR')).reason, 'unsafe-storage');
    } finally {
      await relay.close();
    }
    assert.deepEqual(readdirSync(victim), []);
  });

  it('item 19: an HLS restart deletes only run directories this process created, never through a link', async () => {
    const hls = join(dir, 'hls');
    await privateRoot(hls);
    const planted = join(hls, 'ffffffffffffffffffffffffffffffff');
    mkdirSync(planted, { mode: 0o700 });
    writeFileSync(join(planted, 'index.m3u8'), 'not ours');
    const victim = join(dir, 'hls-victim');
    mkdirSync(victim, { mode: 0o700 });
    writeFileSync(join(victim, 'precious'), 'keep me');
    const host = await t.join({ token: t.token({ roomId: 'restarts', participantId: 'host', grant: { canHls: true } }) });
    const run = (await host.hls.start()).info!.playlist!.split('/')[2]!;
    await host.hls.stop();
    // the previous run's directory is swapped for a link to somewhere else before the restart
    renameSync(join(hls, run), join(dir, 'moved-run'));
    symlinkSync(victim, join(hls, run));
    await host.hls.start();
    await host.hls.stop();
    await host.hls.start();
    await host.hls.stop();
    assert.equal(readFileSync(join(victim, 'precious'), 'utf8'), 'keep me');
    assert.ok(existsSync(join(hls, run)), 'the link is left alone');
    assert.equal(readFileSync(join(planted, 'index.m3u8'), 'utf8'), 'not ours', 'a run of someone else (or an earlier process) is never deleted');
    assert.equal((await http(`/hls/${run}/index.m3u8`)).status, 404, 'and nothing is served through the link');
    await host.leave();
  });
});
