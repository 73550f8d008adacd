/**
 * `npm run bench:outputs`: what the media outputs cost and how late they are.
 * - CPU of the relay and its ffmpegs per running output, with a stage of 1, 4 and 9 publishers
 *   (camera + microphone each) composited at 360p and 720p, against the same relay and stage
 *   with no output in the same run (the floor).
 * - The composite following the stage: a camera published or unpublished → the first output of
 *   a run with the new stage.
 * - HLS live delay: a camera turns white at a known wall-clock time; hls.js in Chromium plays
 *   the room's playlist and notes when its picture turns white.
 * - Transcription latency: a microphone speaks a sentence; the time from its last sample to the
 *   final `transcription` event at a subscriber.
 * The CPU part's publishers are werift in this process, the HLS camera a Chromium page (run in
 * scripts/netns.sh's namespace, as `npm run bench:outputs` does); the relay runs in its own
 * process so that its CPU, and its ffmpegs', can be read from /proc.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from '@playwright/test';
import { WebSocket as NodeWebSocket } from 'ws';
import type { OutputName } from '../src/protocol/control.ts';
import { Sdk, type Room } from '../src/index.ts';
import { mintToken } from '../src/server/mint.ts';
import { CHROMIUM_ARGS } from '../playwright.config.ts';
import { nodePlatform } from '../test/media-helpers.ts';
import { startNginxRtmp } from '../test/nginx-rtmp.ts';
import { realTrack, vp8Clip, type RealTrack } from '../test/real-media.ts';
import { serveStatic } from '../test-e2e/static-server.ts';
import { summary, table } from './lib.ts';
import { speakingMicrophone } from './paced-media.ts';
import { child, message, stop } from './procs.ts';
import { measureTree } from './tree-cpu.ts';
import { CompositeRun } from '../relay/outputs/ffmpeg/composite-run.ts';
import { compositeFont, DEFAULT_COMPOSITE } from '../relay/outputs/media-output.ts';
import { createLogger } from '../relay/log.ts';
import { startTestRelay } from '../test/helpers.ts';

(globalThis as { WebSocket?: unknown }).WebSocket ??= NodeWebSocket;

const SECRET = 'bench-secret-0123456789';
const sleep = (n: number) => new Promise((r) => setTimeout(r, n));
const GRANT = { canPublish: true, canSubscribe: true, canPublishData: true, canSubscribeData: true, canRecord: true, canHls: true, canLivestream: true, canTranscribe: true };
const token = (room: string, id: string) => mintToken({ apiKey: 'bench', secret: SECRET, roomId: room, participantId: id, grant: GRANT });
/** Chromium gathers no candidates on loopback: the benchmark runs in scripts/netns.sh's namespace, like the media tests. */
const MEDIA_IP = process.env.TESSERA_E2E_MEDIA_IP ?? '127.0.0.1';
const WINDOW_MS = Number(process.env.BENCH_OUTPUTS_WINDOW_MS ?? 8000);
const quick = Boolean(process.env.BENCH_OUTPUTS_QUICK);

interface RelayChild {
  url: string;
  http: string;
  pid: number;
  close(): Promise<void>;
}

async function relayChild(config: Record<string, unknown>): Promise<RelayChild> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-outputs-'));
  const proc = child('server-child.ts', ['relay'], {
    BENCH_SECRET: SECRET,
    BENCH_RELAY_CONFIG: JSON.stringify({ mediaIp: '127.0.0.1', recordingsDir: join(dir, 'recordings'), hlsDir: join(dir, 'hls'), allowPrivateRtmp: true, logLevel: process.env.BENCH_OUTPUTS_LOG ?? 'warn', ...config }),
  });
  const { url } = await message<{ url: string }>(proc);
  return {
    url,
    http: url.replace(/^ws/, 'http'),
    pid: proc.pid!,
    close: async () => {
      await stop(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const join$ = (url: string, room: string, id: string) => Sdk.join({ url, token: token(room, id), media: nodePlatform });

/** Start an output and wait until it is active; its `info`. */
async function startOutput(room: Room, output: OutputName, options?: object): Promise<unknown> {
  const status = await (room[output] as { start(o?: object): Promise<{ state: string; info?: unknown }> }).start(options);
  if (status.state !== 'active') throw new Error(`${output} is ${status.state}`);
  return status.info;
}

// ---- CPU per output ----------------------------------------------------------------------

/** Publications that did not connect at the first try (the machine too busy), published again. */
let retries = 0;

async function cpuRows(rtmp: string): Promise<Array<Array<string | number>>> {
  const rows: Array<Array<string | number>> = [];
  const allSizes = [{ label: '360p', width: 640, height: 360, videoKbps: 800 }, { label: '720p', width: 1280, height: 720, videoKbps: 2500 }];
  // BENCH_OUTPUTS_SIZES=720p, BENCH_OUTPUTS_TILES=9: one part of the table
  const sizes = process.env.BENCH_OUTPUTS_SIZES ? allSizes.filter((s) => process.env.BENCH_OUTPUTS_SIZES!.split(',').includes(s.label)) : quick ? allSizes.slice(0, 1) : allSizes;
  const stages = process.env.BENCH_OUTPUTS_TILES ? process.env.BENCH_OUTPUTS_TILES.split(',').map(Number) : quick ? [1] : [1, 4, 9];
  const outputs: Array<[OutputName, object | undefined]> = [['recording', undefined], ['hls', undefined], ['livestream', { url: `${rtmp}/bench-key` }]];
  // each publisher sends one clip encoded once: nine encoders of their own took both cores
  const clipDir = mkdtempSync(join(tmpdir(), 'tessera-bench-clip-'));
  const clip = await vp8Clip(join(clipDir, 'camera.webm'));
  for (const size of sizes) {
    const relay = await relayChild({ composite: { width: size.width, height: size.height, fps: 25, videoKbps: size.videoKbps } });
    const control = await join$(relay.url, 'cpu', 'control');
    const people: Array<{ room: Room; tracks: RealTrack[] }> = [];
    for (const tiles of stages) {
      while (people.length < tiles) {
        const room = await join$(relay.url, 'cpu', `p${people.length}`);
        const tracks = [await realTrack('video', { file: clip, loop: true }), await realTrack('audio')];
        // on two busy cores a publication may not connect in time: count it and publish again
        const publish = async (source: 'camera' | 'microphone', track: MediaStreamTrack) => {
          for (let attempt = 0; ; attempt++) {
            try {
              return await room.localParticipant.publish(source, track);
            } catch (err) {
              if (attempt >= 2) throw err;
              retries++;
            }
          }
        };
        await publish('camera', tracks[0]!.track);
        await publish('microphone', tracks[1]!.track);
        people.push({ room, tracks });
      }
      console.error(`bench:outputs: ${size.label}, ${tiles} publishers`);
      await sleep(2000);
      const floor = await measureTree(relay.pid, () => sleep(WINDOW_MS));
      rows.push([size.label, tiles, 'none (the floor)', (floor.root * 100).toFixed(1), '—', (floor.root * 100).toFixed(1)]);
      for (const [output, options] of outputs) {
        const started = await startOutput(control, output, options).then(
          () => null,
          (err: Error) => err.message,
        );
        if (started !== null) {
          // a figure too: what this machine cannot start within the relay's deadline
          rows.push([size.label, tiles, output, '—', '—', `did not start: ${started}`]);
          await (control[output] as { stop(): Promise<unknown> }).stop().catch(() => undefined);
          continue;
        }
        // the composite restarts while every track comes in: measure the steady state
        await sleep(4000);
        const m = await measureTree(relay.pid, () => sleep(WINDOW_MS));
        await (control[output] as { stop(): Promise<unknown> }).stop();
        rows.push([size.label, tiles, output, (m.root * 100).toFixed(1), (m.children * 100).toFixed(1), ((m.root - floor.root + m.children) * 100).toFixed(1)]);
        await sleep(1000);
      }
    }
    for (const p of people) {
      p.tracks.forEach((t) => t.stop());
      await p.room.leave();
    }
    await control.leave();
    await relay.close();
  }
  rmSync(clipDir, { recursive: true, force: true });
  return rows;
}

// ---- the composite follows the stage ----------------------------------------------------

/**
 * How long the composite takes to show a stage change: from the moment a publication is
 * announced (publish resolved) or gone (unpublish resolved) to the first output of a run whose
 * stage has it, or no longer has it. The relay and the composite run in this process (the
 * composite's own object, as every media output makes it), its publishers are werift here.
 */
async function stageFollow(): Promise<{ comes: number[]; goes: number[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-follow-'));
  const relay = await startTestRelay({ mediaIp: '127.0.0.1', logger: createLogger('silent') });
  const tracks: RealTrack[] = [];
  const clip = await vp8Clip(join(dir, 'clip.webm'));
  const real = async (kind: 'video' | 'audio') => {
    const t = kind === 'video' ? await realTrack('video', { file: clip, loop: true }) : await realTrack('audio');
    tracks.push(t);
    return t;
  };
  const grant = { canPublish: true, canSubscribe: true };
  const ada = await relay.join({ token: relay.token({ roomId: 'follow', participantId: 'ada', grant }), media: nodePlatform });
  const bo = await relay.join({ token: relay.token({ roomId: 'follow', participantId: 'bo', grant }), media: nodePlatform });
  await ada.localParticipant.publish('camera', (await real('video')).track);
  const room = relay.relay.context.rooms.get('default', 'follow')!;
  const composite = new CompositeRun((tap) => room.media.tap(tap), {
    ffmpeg: 'ffmpeg',
    workDir: join(dir, 'work'),
    ...DEFAULT_COMPOSITE,
    roomName: 'follow',
    font: compositeFont(),
    nameOf: (id) => room.get(id)?.name ?? id,
    output: () => ['-f', 'null', '-'],
    failed: (reason) => console.error(`bench:outputs: the composite failed: ${reason}`),
    log: createLogger(process.env.BENCH_OUTPUTS_LOG === 'debug' ? 'debug' : 'silent'),
  });
  const stage = () => composite.stage.map((t) => `${t.participantId}:${t.source}`).join(' ');
  /** Ms from now until a run with this stage writes. */
  const until = async (want: string): Promise<number> => {
    const t0 = Date.now();
    while (!(stage() === want && composite.seconds > 0) && Date.now() - t0 < 30_000) await sleep(20);
    return Date.now() - t0;
  };
  const comes: number[] = [];
  const goes: number[] = [];
  try {
    await composite.start();
    await until('ada:camera');
    for (let i = 0; i < (quick ? 2 : 5); i++) {
      await sleep(2000);
      await bo.localParticipant.publish('camera', (await real('video')).track);
      comes.push(await until('ada:camera bo:camera'));
      await sleep(2000);
      await bo.localParticipant.unpublish('camera');
      goes.push(await until('ada:camera'));
    }
  } finally {
    await composite.stop();
    for (const t of tracks) t.stop();
    await Promise.all([ada.leave(), bo.leave()]);
    await relay.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return { comes, goes };
}

// ---- HLS live delay ----------------------------------------------------------------------

/** In the page: play `src` with hls.js and resolve the wall-clock time its picture turns white after `after`. */
const PLAYER = `window.play = (src) => new Promise((resolve, reject) => {
  const video = document.createElement('video');
  video.muted = true;
  document.body.append(video);
  const hls = new Hls({ liveSyncDurationCount: 1, liveMaxLatencyDurationCount: 3 });
  hls.on(Hls.Events.ERROR, (_, data) => data.fatal && reject(new Error(data.details)));
  hls.loadSource(src);
  hls.attachMedia(video);
  video.play().catch(() => undefined);
  const canvas = document.createElement('canvas');
  canvas.width = 16; canvas.height = 9;
  const g = canvas.getContext('2d', { willReadFrequently: true });
  window.latency = () => ({ latency: hls.latency, position: video.currentTime, buffered: video.buffered.length ? video.buffered.end(video.buffered.length - 1) : 0 });
  window.whiteAfter = (after) => new Promise((done) => {
    // the middle of the picture: the camera's tile (the composite has margins, a label, bars)
    const look = () => {
      const w = video.videoWidth, h = video.videoHeight;
      g.drawImage(video, w * 0.375, h * 0.375, w / 4, h / 4, 0, 0, 16, 9);
      const px = g.getImageData(0, 0, 16, 9).data;
      let sum = 0;
      for (let i = 0; i < px.length; i += 4) sum += px[i];
      const now = Date.now();
      if (now > after && sum / (px.length / 4) > 128) done(now); else requestAnimationFrame(look);
    };
    look();
  });
  video.addEventListener('playing', () => resolve(true), { once: true });
});`;

/** In the publishing page: a camera (a canvas) that turns white on `flash()`, which resolves when it first painted white. */
const FLASH_CAMERA = `window.flashCamera = () => {
  const canvas = Object.assign(document.createElement('canvas'), { width: 640, height: 360 });
  const g = canvas.getContext('2d');
  let whiteUntil = 0, painted = null, n = 0;
  setInterval(() => {
    const white = Date.now() < whiteUntil;
    g.fillStyle = white ? '#fff' : '#000';
    g.fillRect(0, 0, 640, 360);
    g.fillStyle = '#888';
    g.fillRect((n++ * 8) % 640, 0, 16, 8);
    if (white && painted) { painted(Date.now()); painted = null; }
  }, 40);
  window.flash = (ms) => new Promise((resolve) => { whiteUntil = Date.now() + ms; painted = resolve; });
  return canvas.captureStream(25).getVideoTracks()[0];
};`;

async function hlsDelay(): Promise<{ delays: number[]; reported: number[] }> {
  // Chromium's media goes to the namespace's address; werift publishers (the other parts) use loopback
  const relay = await relayChild({ mediaIp: MEDIA_IP });
  const { server, origin } = await serveStatic();
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', headless: true, args: [...CHROMIUM_ARGS, '--disable-features=WebRtcHideLocalIpsWithMdns', '--autoplay-policy=no-user-gesture-required'] });
  try {
    const camera = await browser.newPage();
    await camera.goto(`${origin}/test-e2e/pages/esm.html`);
    await camera.waitForFunction(() => (window as unknown as { Tessera?: unknown }).Tessera);
    await camera.evaluate(FLASH_CAMERA);
    const info = await camera.evaluate(
      async ({ url, t }) => {
        const w = window as unknown as { Tessera: { Sdk: { join(o: object): Promise<Room> } }; flashCamera(): MediaStreamTrack; room: Room };
        w.room = await w.Tessera.Sdk.join({ url, token: t });
        await w.room.localParticipant.publish('camera', w.flashCamera());
        await new Promise((r) => setTimeout(r, 1000));
        return (await w.room.hls.start()).info as { playlist: string };
      },
      { url: relay.url, t: token('delay', 'cam') },
    );
    const playlist = new URL(info.playlist, relay.http).href;
    const page = await browser.newPage();
    await page.goto(`${origin}/test-e2e/pages/blank.html`);
    await page.addScriptTag({ path: 'node_modules/hls.js/dist/hls.min.js' });
    await page.evaluate(PLAYER);
    await page.evaluate((src) => (window as unknown as { play(s: string): Promise<boolean> }).play(src), playlist);
    await sleep(3000);
    const delays: number[] = [];
    const reported: number[] = [];
    for (let i = 0; i < (quick ? 2 : 6); i++) {
      const before = Date.now();
      const seen = page.evaluate((after) => (window as unknown as { whiteAfter(a: number): Promise<number> }).whiteAfter(after), before);
      const white = await camera.evaluate(() => (window as unknown as { flash(ms: number): Promise<number> }).flash(2000));
      delays.push((await seen) - white);
      reported.push((await page.evaluate(() => (window as unknown as { latency(): { latency: number } }).latency())).latency * 1000);
      // a random pause: the flashes fall at different points of a segment (the delay proved the
      // same at every point: hls.js plays at a steady offset behind the live edge)
      await sleep(3000 + Math.random() * 2000);
    }
    return { delays, reported };
  } finally {
    await browser.close();
    server.close();
    await relay.close();
  }
}

// ---- transcription latency ---------------------------------------------------------------

async function transcriptionLatency(): Promise<{ latencies: number[]; texts: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-speech-'));
  const wav = join(dir, 'speech.wav');
  execFileSync('espeak-ng', ['-w', join(dir, 'raw.wav'), 'hello world this is a test']);
  execFileSync('ffmpeg', ['-loglevel', 'error', '-y', '-i', join(dir, 'raw.wav'), '-ar', '48000', '-ac', '1', '-c:a', 'pcm_s16le', wav]);
  const relay = await relayChild({});
  const mic = await speakingMicrophone(wav);
  const speaker = await join$(relay.url, 'asr', 'speaker');
  const listener = await join$(relay.url, 'asr', 'listener');
  const finals: Array<{ at: number; text: string }> = [];
  listener.on('transcription', (e) => e.final && finals.push({ at: Date.now(), text: e.text }));
  try {
    await speaker.localParticipant.publish('microphone', mic.track);
    await startOutput(speaker, 'transcription');
    await sleep(2000);
    const latencies: number[] = [];
    const texts: string[] = [];
    for (let i = 0; i < (quick ? 2 : 6); i++) {
      const seen = finals.length;
      const ended = await mic.say();
      const deadline = Date.now() + 8000;
      while (finals.length === seen && Date.now() < deadline) await sleep(10);
      const got = finals[seen];
      if (got) {
        latencies.push(got.at - ended);
        texts.push(got.text);
      }
      await sleep(3000);
    }
    return { latencies, texts };
  } finally {
    mic.stop();
    await speaker.leave();
    await listener.leave();
    await relay.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchOutputs(): Promise<string> {
  const nginx = await startNginxRtmp();
  const out: string[] = [];
  const parts = (process.env.BENCH_OUTPUTS_PARTS ?? 'cpu,follow,hls,asr').split(',');
  try {
    if (parts.includes('cpu')) {
      const rows = await cpuRows(nginx.url);
      out.push('### CPU per running output (% of one core; relay = the relay process, ffmpeg = its children)\n');
      out.push(table(['composite', 'tiles', 'output', 'relay', 'ffmpeg', 'output cost (relay above the floor + ffmpeg)'], rows));
      out.push(`\n(${retries} publication(s) did not connect at the first try on the loaded machine and were published again.)`);
    }
  } finally {
    await nginx.stop();
  }
  const follow = parts.includes('follow') ? await stageFollow() : { comes: [], goes: [] };
  const { delays, reported } = parts.includes('hls') ? await hlsDelay() : { delays: [NaN], reported: [NaN] };
  const d = summary(delays);
  const asr = parts.includes('asr') ? await transcriptionLatency() : { latencies: [], texts: [] };
  const l = asr.latencies.length ? summary(asr.latencies) : null;
  out.push('\n### Latency\n');
  out.push(
    table(
      ['measure', 'figure', 'goal'],
      [
        [`the composite follows the stage (720p): a camera published → a run with it writes (${follow.comes.length} changes)`, follow.comes.length ? `median ${(summary(follow.comes).p50 / 1000).toFixed(2)} s, max ${(Math.max(...follow.comes) / 1000).toFixed(2)} s` : '—', '≤ 3 s'],
        [`… a camera unpublished → a run without it writes (${follow.goes.length} changes)`, follow.goes.length ? `median ${(summary(follow.goes).p50 / 1000).toFixed(2)} s, max ${(Math.max(...follow.goes) / 1000).toFixed(2)} s` : '—', '≤ 3 s'],
        [`HLS live delay, camera turns white → white in hls.js (2 s segments, liveSyncDurationCount 1; ${delays.length} flashes)`, `median ${(d.p50 / 1000).toFixed(2)} s, max ${(Math.max(...delays) / 1000).toFixed(2)} s`, '≤ 6 s'],
        ["… hls.js's own latency estimate at those moments (live edge − position)", `median ${(summary(reported).p50 / 1000).toFixed(2)} s`, ''],
        [`transcription, end of speech → final event (${asr.latencies.length} of ${quick ? 2 : 6} utterances heard)`, l ? `median ${l.p50} ms, max ${Math.max(...asr.latencies)} ms` : 'no final event', '≤ 2 s'],
        ['what the local engine heard', asr.texts.map((t) => `"${t}"`).join(', ') || '—', ''],
      ],
    ),
  );
  return out.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`# Outputs benchmark — ${new Date().toISOString()}`);
  console.log(`node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}\n`);
  console.log(await benchOutputs());
  process.exit(0);
}
