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
