import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createSocket } from 'node:dgram';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { compositeGraph, encoderArgs, gridOf } from './composite.ts';
import { FfmpegProcess, findExecutable } from './process.ts';

const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';
const font = existsSync(FONT) ? FONT : null;

describe('the stage composite graph (issue 13)', () => {
  it('lays tiles out in a grid as square as it gets', () => {
    assert.deepEqual([1, 2, 3, 4, 5, 9, 10].map((n) => gridOf(n)), [
      { cols: 1, rows: 1 }, { cols: 2, rows: 1 }, { cols: 2, rows: 2 }, { cols: 2, rows: 2 }, { cols: 3, rows: 2 }, { cols: 3, rows: 3 }, { cols: 4, rows: 3 },
    ]);
  });

  it('labels go through files with drawtext expansion off; a path that would need quoting is refused', () => {
    const g = compositeGraph({ width: 1280, height: 720, fps: 30, labels: ['/tmp/a.txt', '/tmp/b.txt'], audios: 2, roomCard: '/tmp/room.txt', font: '/f.ttf' });
    assert.match(g.filter, /textfile=\/tmp\/a\.txt:expansion=none/);
    assert.match(g.filter, /xstack=inputs=2:layout=0_0\|640_0/);
    assert.match(g.filter, /amix=inputs=2/);
    assert.throws(() => compositeGraph({ width: 640, height: 360, fps: 15, labels: ["/tmp/it's:[x].txt"], audios: 0, roomCard: '/tmp/r.txt', font: '/f.ttf' }));
    const empty = compositeGraph({ width: 640, height: 360, fps: 15, labels: [], audios: 0, roomCard: '/tmp/r.txt', font: null });
    assert.match(empty.filter, /^color=.*realtime\[vout\];anullsrc=.*arealtime\[aout\]$/);
  });
});

const FFMPEG = findExecutable('ffmpeg');

describe('the stage composite through ffmpeg: VP8 and Opus over RTP in, H.264 and AAC out (issue 13)', { skip: FFMPEG ? false : 'ffmpeg is not installed' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-composite-'));
  const senders: ChildProcess[] = [];
  after(() => {
    for (const s of senders) s.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  /** Free even UDP ports (RTP on p, RTCP on p + 1). */
  async function freePorts(n: number): Promise<number[]> {
    const ports: number[] = [];
    while (ports.length < n) {
      const socket = createSocket('udp4');
      await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
      const port = socket.address().port;
      socket.close();
      if (port % 2 === 0 && port < 65000 && !ports.includes(port)) ports.push(port);
    }
    return ports;
  }

  function probe(file: string): { streams: Array<{ codec_name: string; codec_type: string; width?: number }>; format: { duration: string } } {
    return JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name,codec_type,width:format=duration', '-of', 'json', file]).toString());
  }

  async function composite(videos: number, audios: number, names: string[]): Promise<string> {
    const ports = await freePorts(videos + audios);
    let sdp = 'v=0\no=- 0 0 IN IP4 127.0.0.1\ns=tessera\nc=IN IP4 127.0.0.1\nt=0 0\n';
    const labels: string[] = [];
    for (let i = 0; i < videos; i++) {
      sdp += `m=video ${ports[i]} RTP/AVP 96\na=rtpmap:96 VP8/90000\n`;
      const file = join(dir, `label-${videos}-${i}.txt`);
      writeFileSync(file, names[i] ?? `tile ${i}`);
      labels.push(file);
    }
    for (let j = 0; j < audios; j++) sdp += `m=audio ${ports[videos + j]} RTP/AVP 111\na=rtpmap:111 opus/48000/2\n`;
    const sdpFile = join(dir, `in-${videos}-${audios}.sdp`);
    writeFileSync(sdpFile, sdp);
    const roomCard = join(dir, 'room.txt');
    writeFileSync(roomCard, "the room's name: %{localtime} ;[x]");
    const out = join(dir, `out-${videos}-${audios}.mp4`);
    const graph = compositeGraph({ width: 640, height: 360, fps: 15, labels, audios, roomCard, font });
    const inputs = videos + audios > 0 ? ['-protocol_whitelist', 'file,udp,rtp', '-use_wallclock_as_timestamps', '1', '-i', sdpFile] : [];
    const started = Date.now();
    const ffmpeg = await FfmpegProcess.start({ ffmpeg: 'ffmpeg', args: ['-loglevel', 'error', ...inputs, '-filter_complex', graph.filter, '-map', graph.video, '-map', graph.audio, ...encoderArgs(15, 800), '-t', '3', '-y', out] });
    // the senders start once the composite listens, as the relay's forwarders would
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < videos; i++) {
      senders.push(spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'testsrc=size=320x180:rate=15', '-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '300k', '-g', '15', '-payload_type', '96', '-f', 'rtp', `rtp://127.0.0.1:${ports[i]}`]));
    }
    for (let j = 0; j < audios; j++) {
      senders.push(spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-ac', '2', '-c:a', 'libopus', '-payload_type', '111', '-f', 'rtp', `rtp://127.0.0.1:${ports[videos + j]}`]));
    }
    const exit = await ffmpeg.exited;
    assert.equal(exit.code, 0, exit.reason);
    assert.ok(Date.now() - started >= 2500, 'live: paced by its inputs or the wall clock, not faster');
    return out;
  }

  for (const [videos, audios] of [[0, 0], [1, 0], [1, 1], [3, 2]] as const) {
    it(`${videos} video and ${audios} audio tracks → one H.264 + AAC file of the time it ran`, { timeout: 60_000 }, async () => {
      const out = await composite(videos, audios, ["Ada '%{n}", 'Bo:b [x];', 'Cy\\']);
      const { streams, format } = probe(out);
      assert.deepEqual(streams.map((s) => s.codec_name).sort(), ['aac', 'h264']);
      assert.equal(streams.find((s) => s.codec_type === 'video')?.width, 640);
      assert.ok(Math.abs(Number(format.duration) - 3) < 0.3, `duration ${format.duration}`);
    });
  }
});
