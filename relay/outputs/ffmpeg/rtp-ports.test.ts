import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { freeRtpPorts } from './rtp-feed.ts';

const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'latin1').trim().split(/\s+/)[0]);

describe('RTP ports for ffmpeg', () => {
  it('even ports below the ephemeral range with p + 1 free too, never the same twice while held', async () => {
    const first = await freeRtpPorts(20);
    const second = await freeRtpPorts(20);
    const all = [...first, ...second];
    assert.equal(new Set(all).size, 40);
    for (const p of all) {
      assert.equal(p % 2, 0);
      assert.ok(p + 1 < low, `${p} is below the ephemeral range (${low})`);
    }
    // both ports of each pair can be bound now (nothing else took them)
    for (const p of first.slice(0, 5)) {
      for (const port of [p, p + 1]) {
        const socket = createSocket('udp4');
        await new Promise<void>((resolve, reject) => socket.once('error', reject).bind(port, '127.0.0.1', () => resolve()));
        socket.close();
      }
    }
  });

  it('a port bound port-0 by the kernel is never one of ours (they are outside its range)', async () => {
    const sockets = await Promise.all(
      Array.from({ length: 50 }, () => new Promise<ReturnType<typeof createSocket>>((resolve) => {
        const s = createSocket('udp4');
        s.bind(0, '127.0.0.1', () => resolve(s));
      })),
    );
    const kernel = new Set(sockets.map((s) => s.address().port));
    const ours = await freeRtpPorts(50);
    for (const p of ours) assert.ok(!kernel.has(p) && !kernel.has(p + 1));
    sockets.forEach((s) => s.close());
  });
});

describe("ffmpeg's RTP input", () => {
  it('is bound to loopback, RTP and RTCP: left to itself ffmpeg bound every interface and took a room\'s media from anyone on the network', async () => {
    const { spawn } = await import('node:child_process');
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { FEED_INPUT, feedSdp } = await import('./rtp-feed.ts');
    const dir = mkdtempSync(join(tmpdir(), 'tessera-feed-'));
    const [video, audio] = await freeRtpPorts(2);
    const sdp = join(dir, 'in.sdp');
    writeFileSync(sdp, feedSdp([{ kind: 'video', port: video! }, { kind: 'audio', port: audio! }]));
    const ffmpeg = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', ...FEED_INPUT, '-i', sdp, '-f', 'null', '-'], { stdio: 'ignore' });
    try {
      const wanted = [video!, video! + 1, audio!, audio! + 1];
      // /proc/net/udp: "local_address" as hex IPv4:port
      const bound = () => readFileSync('/proc/net/udp', 'latin1').split('\n').slice(1).map((l) => l.trim().split(/\s+/)[1]).filter((a): a is string => !!a).map((a) => ({ ip: a.split(':')[0]!, port: parseInt(a.split(':')[1]!, 16) })).filter((a) => wanted.includes(a.port));
      const deadline = Date.now() + 10_000;
      while (bound().length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const sockets = bound();
      assert.equal(sockets.length, 4, 'ffmpeg bound its four ports');
      for (const s of sockets) assert.equal(s.ip, '0100007F', `port ${s.port} is bound to ${s.ip}, not 127.0.0.1`);
    } finally {
      ffmpeg.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
