import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { findExecutable } from '../relay/outputs/ffmpeg/process.ts';
import { DEFAULT_ASR_MODEL } from '../relay/outputs/transcription/local-engine.ts';
import { OUTPUTS, OUTPUT_FLAGS, type OutputName } from '../src/protocol/control.ts';
import type { Room } from '../src/room.ts';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawJoin } from './raw.ts';

const ALL = { canRecord: true, canHls: true, canLivestream: true, canTranscribe: true, canWhiteboard: true, canPublishData: true, canModerate: true };

describe('outputs: each gated by its flag, a state machine, a real local provider', () => {
  let t: TestRelay;
  let http: string;
  const hooks: Array<Record<string, unknown>> = [];
  const hook = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      hooks.push(JSON.parse(body) as Record<string, unknown>);
      res.writeHead(204).end();
    });
  });
  const dir = mkdtempSync(join(tmpdir(), 'tessera-outputs-'));
  let hlsPlaylist = '';

  before(async () => {
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
    t = await startTestRelay({
      recordingsDir: join(dir, 'rec'),
      hlsDir: join(dir, 'hls'),
      hlsSegmentSeconds: 1,
      transcriptionUrl: `http://127.0.0.1:${(hook.address() as { port: number }).port}/hook`,
      allowPrivateRtmp: true, // the RTMP target is on loopback
    });
    http = t.url.replace('ws:', 'http:');
  });
  after(async () => {
    await t.close();
    hook.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const host = (room: string, grant: Record<string, boolean> = ALL, id = 'host') => t.join({ token: t.token({ roomId: room, participantId: id, grant }) });

  it('without its flag every start and stop is INVALID_PERMISSIONS; with it, it runs', async () => {
    const nobody = await host('o1', {}, 'nobody');
    for (const output of OUTPUTS) {
      const err = await rejectsWith(nobody[output].start(), 'INVALID_PERMISSIONS');
      assert.equal(err.reason, `missing-${OUTPUT_FLAGS[output]}`);
      await rejectsWith(nobody[output].stop(), 'INVALID_PERMISSIONS');
    }
    for (const output of ['recording', 'hls', 'whiteboard', 'transcription'] as OutputName[]) {
      const only = await host('o1', { [OUTPUT_FLAGS[output]]: true }, `only-${output}`);
      await only[output].start();
      for (const other of OUTPUTS.filter((o) => o !== output)) await rejectsWith(only[other].start(), 'INVALID_PERMISSIONS');
      await only[output].stop();
      await only.leave();
    }
    await nobody.leave();
  });

  it('every change reaches everyone as output-changed; late joiners see the states; double start/stop are clear errors', async () => {
    const a = await host('o2');
    const b = await host('o2', {}, 'b');
    const seen: Array<{ output: string; state: string; by?: string }> = [];
    b.on('output-changed', ({ output, state, by }) => seen.push({ output, state, ...(by ? { by } : {}) }));
    const status = await a.whiteboard.start();
    assert.equal(status.state, 'active');
    await until(() => seen.length === 2);
    assert.deepEqual(seen, [{ output: 'whiteboard', state: 'starting', by: 'host' }, { output: 'whiteboard', state: 'active', by: 'host' }]);
    assert.equal(b.whiteboard.state, 'active');
    const late = await host('o2', {}, 'late');
    assert.equal(late.whiteboard.state, 'active');
    assert.equal(late.recording.state, 'stopped');
    const again = await rejectsWith(a.whiteboard.start(), 'INVALID_STATE');
    assert.equal(again.reason, 'output-already-active');
    await a.whiteboard.stop();
    const stopped = await rejectsWith(a.whiteboard.stop(), 'INVALID_STATE');
    assert.equal(stopped.reason, 'output-not-active');
    await until(() => late.whiteboard.state === 'stopped');
    for (const r of [a, b, late]) await r.leave();
  });

  it('recording writes the room timeline to a file, listed and downloadable with a canRecord token of the room', async () => {
    const a = await host('o3');
    const status = await a.recording.start();
    const url = status.info!.url!;
    const b = await host('o3', { canPublishData: true }, 'b');
    await a.pubsub.publish('chat', { text: 'for the record' });
    // a large payload is read as its bytes (relay/data/publish-cut.ts): the timeline still has its value
    const large = { text: 'long', body: 'z'.repeat(5000) };
    await a.pubsub.publish('chat', large);
    await a.pubsub.publish('chat', 'secret', { to: ['b'] });
    await b.leave();
    await a.recording.stop();
    const auth = { authorization: `Bearer ${t.token({ roomId: 'o3', grant: { canRecord: true } })}` };
    const list = (await (await fetch(`${http}/recordings`, { headers: auth })).json()) as { recordings: Array<{ recording: string; file: string; url: string; size: number }> };
    assert.deepEqual(list.recordings.map((r) => r.file), ['composite.mp4', 'timeline.jsonl']);
    const timelineEntry = list.recordings.find((r) => r.file === 'timeline.jsonl')!;
    assert.equal(timelineEntry.url, url);
    assert.equal(timelineEntry.recording, status.info!.recording);
    assert.equal(url, `/recordings/${status.info!.recording}/timeline.jsonl`);
    const res = await fetch(`${http}${url}`, { headers: auth });
    assert.equal(res.status, 200);
    const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l) as { type: string; payload?: unknown; participantId?: string });
    assert.equal(lines[0]!.type, 'recording-started');
    assert.equal(lines.at(-1)!.type, 'recording-stopped');
    assert.ok(lines.some((l) => l.type === 'participant-joined' && l.participantId === 'b'));
    assert.ok(lines.some((l) => l.type === 'message' && (l.payload as { text: string }).text === 'for the record'));
    assert.deepEqual(lines.find((l) => l.type === 'message' && (l.payload as { text: string }).text === 'long')?.payload, large);
    assert.ok(!lines.some((l) => l.payload === 'secret'), 'targeted messages stay private');
    assert.ok(lines.some((l) => l.type === 'participant-left' && l.participantId === 'b'));
    assert.equal((await fetch(`${http}/recordings`)).status, 401, 'no token');
    const noFlag = { authorization: `Bearer ${t.token({ roomId: 'o3', grant: {} })}` };
    assert.equal((await fetch(`${http}/recordings`, { headers: noFlag })).status, 403);
    const otherRoom = { authorization: `Bearer ${t.token({ roomId: 'other', grant: { canRecord: true } })}` };
    assert.deepEqual(((await (await fetch(`${http}/recordings`, { headers: otherRoom })).json()) as { recordings: unknown[] }).recordings, []);
    assert.equal((await fetch(`${http}${url}`, { headers: otherRoom })).status, 404);
    await a.leave();
  });

  it('hls: a master playlist under /hls/<run id> (media and WebVTT subtitles with the stage events as cues), ended on stop', async () => {
    const a = await host('o4');
    const status = await a.hls.start({ segmentSeconds: 0.5 });
    assert.match(status.info!.playlist!, /^\/hls\/[0-9a-f]{32}\/index\.m3u8$/);
    const playlist = `${http}${status.info!.playlist}`;
    const file = (name: string) => playlist.replace('index.m3u8', name);
    await a.pubsub.publish('chat', 'hello hls');
    const speaker = await host('o4', {}, 'guest');
    await until(async () => (await (await fetch(file('subs.m3u8'))).text()).split('sub').length > 3, 10_000, 'subtitle segments');
    assert.match(await (await fetch(playlist)).text(), /^#EXTM3U\n[^]*URI="subs\.m3u8"[^]*\nmedia\.m3u8\n$/);
    let text = await (await fetch(file('subs.m3u8'))).text();
    assert.match(text, /#EXT-X-TARGETDURATION:\d+/);
    assert.doesNotMatch(text, /#EXT-X-ENDLIST/);
    await speaker.leave();
    assert.equal((await fetch(playlist)).headers.get('content-type'), 'application/vnd.apple.mpegurl');
    await a.hls.stop();
    text = await (await fetch(file('subs.m3u8'))).text();
    assert.match(text, /#EXT-X-ENDLIST/);
    assert.match(await (await fetch(file('media.m3u8'))).text(), /#EXT-X-ENDLIST/);
    const segments = [...text.matchAll(/^(sub\d+\.vtt)$/gm)].map((m) => m[1]!);
    const bodies = await Promise.all(segments.map(async (s) => (await fetch(file(s))).text()));
    assert.ok(bodies.every((b) => b.startsWith('WEBVTT')));
    assert.ok(bodies.some((b) => b.includes('guest joined the stage')));
    assert.ok(!bodies.some((b) => b.includes('hello hls')), 'pubsub messages are not stage events');
    assert.equal((await fetch(`${http}/hls/o4/..%2f..%2fetc%2fpasswd`)).status, 404, 'nothing outside the HLS tree');
    assert.equal((await fetch(`${http}/hls/o4/index.m3u8`)).status, 404, 'the room id is not the URL');
    hlsPlaylist = status.info!.playlist!;
    const runDir = join(dir, 'hls', hlsPlaylist.split('/')[2]!);
    assert.ok(readFileSync(join(runDir, 'index.m3u8'), 'utf8').includes('#EXTM3U'), 'a stopped run stays while its room lives');
    await a.leave();
    // the room is over: its last run goes with it (its project's disk quota is freed)
    await until(() => !existsSync(runDir), 10_000, 'the room\'s last HLS run deleted at its end');
    assert.equal((await fetch(playlist)).status, 404);
  });

  it('livestream: a URL that is not rtmp[s] is INVALID_ARGUMENT; nothing listening is CONNECTION_FAILED (the stream itself: test/livestream.test.ts)', async () => {
    const a = await host('o5');
    try {
      const bad = await rejectsWith(a.livestream.start({ url: 'http://nope' }), 'INVALID_ARGUMENT');
      assert.equal(bad.reason, 'bad-url');
      // the caller's mistake: the room's livestream is as it was, not failed for everyone
      assert.equal(a.livestream.state, 'stopped');
      const port = await new Promise<number>((resolve) => {
        const s = createNetServer().listen(0, '127.0.0.1', () => {
          const { port: free } = s.address() as { port: number };
          s.close(() => resolve(free));
        });
      });
      const unreachable = await rejectsWith(a.livestream.start({ url: `rtmp://127.0.0.1:${port}/live/k` }), 'CONNECTION_FAILED');
      assert.equal(unreachable.kind, 'Network');
      assert.equal(unreachable.reason, 'rtmp-failed');
    } finally {
      await a.leave();
    }
  });

  it('transcription: the relay\'s service is the default engine; without one the local engine runs, and the service engine is refused', async () => {
    const a = await host('o6');
    const status = await a.transcription.start({ language: 'de' });
    assert.deepEqual(status.info, { language: 'de', engine: 'service' });
    await a.transcription.stop();
    const bare = await startTestRelay();
    try {
      const b = await bare.join({ token: bare.token({ roomId: 'o6', grant: { canTranscribe: true } }) });
      const err = await rejectsWith(b.transcription.start({ engine: 'service' }), 'INVALID_ARGUMENT');
      assert.equal(err.reason, 'not-configured');
      assert.equal(b.transcription.state, 'stopped');
      if (findExecutable('ffmpeg') && existsSync(`${DEFAULT_ASR_MODEL}/en-us.lm.bin`)) {
        assert.deepEqual((await b.transcription.start()).info, { language: 'en', engine: 'local' });
        await b.transcription.stop();
      }
    } finally {
      await bare.close();
    }
    await a.leave();
  });

  it('whiteboard: shapes synced to everyone, kept for late joiners; drawing needs canWhiteboard', async () => {
    const a = await host('o7');
    const viewer = await t.join({ token: t.token({ roomId: 'o7', participantId: 'v', isViewer: true, grant: {} }) });
    await rejectsWith(a.whiteboard.draw({ kind: 'rect', x: 0, y: 0, w: 1, h: 1 }), 'INVALID_STATE');
    await a.whiteboard.start();
    const drawn = nextEvent(viewer, 'whiteboard-shape');
    const shape = await a.whiteboard.draw({ kind: 'stroke', points: [0, 0, 10, 10, 20, 5], color: '#ff0000', width: 3 });
    assert.equal(shape.by, 'host');
    assert.deepEqual((await drawn).shape, shape);
    await a.whiteboard.draw({ kind: 'text', x: 5, y: 5, text: 'hello' });
    const late: Room = await t.join({ token: t.token({ roomId: 'o7', participantId: 'late', grant: {} }) });
    assert.deepEqual((await late.whiteboard.getShapes()).map((s) => s.kind), ['stroke', 'text']);
    await rejectsWith(late.whiteboard.draw({ kind: 'rect', x: 0, y: 0, w: 1, h: 1 }), 'INVALID_PERMISSIONS');
    await rejectsWith(late.whiteboard.clear(), 'INVALID_PERMISSIONS');
    for (const bad of [{ kind: 'blob' }, { kind: 'stroke', points: [1] }, { kind: 'rect', x: 'a', y: 0, w: 1, h: 1 }, { kind: 'text', x: 0, y: 0, text: '' }, { kind: 'line', x: 0, y: 0, w: 1, h: 1, color: 'javascript:alert(1)' }]) {
      await rejectsWith(a.whiteboard.draw(bad as never), 'INVALID_ARGUMENT');
    }
    const cleared = nextEvent(late, 'whiteboard-cleared');
    await a.whiteboard.clear();
    assert.deepEqual(await cleared, { by: 'host' });
    assert.deepEqual(await late.whiteboard.getShapes(), []);
    for (const r of [a, viewer, late]) await r.leave();
  });

  it('request-unpublish reaches the target, who decides; it needs canModerate; self and unknown ids are clear errors', async () => {
    const mod = await host('o8');
    const speaker = await host('o8', {}, 'speaker');
    await until(() => mod.remoteParticipants.has('speaker'));
    const asked = nextEvent(speaker, 'unpublish-requested');
    await mod.remoteParticipants.get('speaker')!.requestUnpublish('camera');
    assert.deepEqual(await asked, { source: 'camera', by: 'host' });
    await rejectsWith(speaker.remoteParticipants.get('host')!.requestUnpublish('microphone'), 'INVALID_PERMISSIONS');
    await until(() => speaker.remoteParticipants.has('host'));
    await rejectsWith(mod.remoteParticipants.get('speaker')!.requestUnpublish('webcam' as never), 'INVALID_ARGUMENT');
    await mod.leave();
    await speaker.leave();
  });

  it('a stop sent with the start, while the start awaits its files, leaves nothing behind: no room listener, no media tap, no scratch directory (recording, hls)', async () => {
    const client = await rawJoin(t.url, t.token({ roomId: 'race', participantId: 'racer', grant: ALL }), { participantId: 'racer' });
    const scratch = () => readdirSync(tmpdir()).filter((n) => n.startsWith('tessera-recording-') || n.startsWith('tessera-hls-')).sort();
    const before = scratch();
    let id = 1;
    const answers: string[] = [];
    for (const output of ['recording', 'hls'] as const) {
      for (let round = 0; round < 4; round++) {
        const start = id++;
        const stop = id++;
        // one write: the stop is read while the start awaits its directory
        client.ws.send(JSON.stringify({ type: 'request', id: start, method: 'output.start', params: { output } }));
        client.ws.send(JSON.stringify({ type: 'request', id: stop, method: 'output.stop', params: { output } }));
        const [a, b] = await Promise.all([client.next((f) => f.type === 'response' && f.id === start, 30_000), client.next((f) => f.type === 'response' && f.id === stop, 30_000)]);
        answers.push(`${(a.error as { reason?: string } | undefined)?.reason ?? 'started'}/${(b.error as { reason?: string } | undefined)?.reason ?? 'stopped'}`);
        await until(() => ['stopped', 'failed'].includes(t.relay.context.rooms.get('default', 'race')!.outputs.statuses()[output].state), 30_000, `${output} stopped`);
      }
    }
    assert.ok(answers.some((a) => a.startsWith('output-stopped')), `at least one stop came while its start was under way: ${answers.join(', ')}`);
    const room = t.relay.context.rooms.get('default', 'race')!;
    await until(() => !room.timeline.listening, 10_000, 'no output listens to the room any more');
    assert.equal((room.media as unknown as { taps: Set<unknown> }).taps.size, 0, 'no media tap left');
    await until(() => scratch().join() === before.join(), 10_000, 'no scratch directory left');
    client.ws.close();
  });

  it('the disk reserve (--disk-min-free): below it recording and HLS do not start (RATE_LIMITED, disk-full); a running recording fails once its disk is down to it', async () => {
    const config = t.relay.context.config as { diskMinFree: number };
    const saved = config.diskMinFree;
    const a = await host('disk');
    try {
      config.diskMinFree = Number.MAX_SAFE_INTEGER;
      for (const output of ['recording', 'hls'] as const) {
        const err = await rejectsWith(a[output].start(), 'RATE_LIMITED');
        assert.equal(err.reason, 'disk-full');
        assert.equal(a[output].state, 'failed');
      }
      config.diskMinFree = saved;
      await a.recording.start();
      const failed = new Promise<{ state: string; error?: { reason?: string } }>((resolve) => {
        const off = a.on('output-changed', (change) => {
          if (change.output !== 'recording' || change.state === 'active') return;
          off();
          resolve(change);
        });
      });
      config.diskMinFree = Number.MAX_SAFE_INTEGER;
      const change = await failed;
      assert.equal(change.state, 'failed');
      assert.equal(change.error?.reason, 'disk-full');
    } finally {
      config.diskMinFree = saved;
    }
    await a.leave();
  });

  it('files stay where the relay was told to write them', () => {
    assert.ok(hlsPlaylist.startsWith('/hls/'), 'the HLS run was written under --hls-dir (looked at in its own test, before its room ended)');
    assert.deepEqual(readdirSync(join(dir, 'rec')), ['default'], 'one directory per project');
    assert.ok(readdirSync(join(dir, 'rec', 'default')).includes('o3'), 'and per room');
  });
});
