import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { UdpTransport } from 'werift';
import type { TrackSource } from './engine.ts';
import { checkMediaIp, installUdpErrorHandling } from './udp-errors.ts';
import { WebmFile } from './webm-file.ts';
import { WeriftEngine } from './werift-engine.ts';

/**
 * werift's errors (its UDP sockets', its recordings' writes) never end the relay's process: each
 * ended it before (the crash audit of 2026-12-06).
 */
/** An address of no host here (TEST-NET-2, RFC 5737). */
const FOREIGN = '198.51.100.7';

const source = (kind: 'audio' | 'video'): TrackSource => ({ kind, liveLayers: () => [], onPacket: () => () => undefined, onRtp: () => () => undefined, requestKeyFrame: () => undefined });

/** Resolves with the first unhandled rejection or uncaught exception within `ms`, else null. */
function escaped(ms: number): Promise<unknown> {
  return new Promise((resolve) => {
    const seen = (error: unknown) => done(error);
    const timer = setTimeout(() => done(null), ms);
    function done(value: unknown) {
      clearTimeout(timer);
      process.off('unhandledRejection', seen);
      process.off('uncaughtException', seen);
      resolve(value);
    }
    process.on('unhandledRejection', seen);
    process.on('uncaughtException', seen);
  });
}

describe("werift's UDP sockets: an error is never an uncaught 'error' event", () => {
  installUdpErrorHandling();

  it("a bind to an address not on this host fails the transport's start (it was an 'error' event with no listener: the process ended, and the start waited for ever)", async () => {
    const watch = escaped(300);
    const outcome = await Promise.race([
      UdpTransport.init('udp4', { interfaceAddresses: { udp4: FOREIGN } } as never).then(
        () => 'bound',
        (e: NodeJS.ErrnoException) => e.code,
      ),
      new Promise((r) => setTimeout(() => r('no answer'), 2000)),
    ]);
    assert.equal(outcome, 'EADDRNOTAVAIL');
    assert.equal(await watch, null, 'nothing escaped');
  });

  it('an error on a bound socket (a send that failed) is a lost datagram', async () => {
    const transport = await UdpTransport.init('udp4', { interfaceAddresses: { udp4: '127.0.0.1' } } as never);
    const watch = escaped(100);
    (transport as unknown as { socket: { emit(e: string, v: unknown): void } }).socket.emit('error', new Error('send EPERM'));
    assert.equal(await watch, null);
    await transport.close();
  });

  it('the relay checks at its start that it can receive media on --media-ip', async () => {
    await checkMediaIp('127.0.0.1');
    await assert.rejects(checkMediaIp(FOREIGN), /--media-ip 198\.51\.100\.7 is not an address of this host \(EADDRNOTAVAIL\)/);
  });
});

describe('track recordings: a write that fails ends the file, never the process', () => {
  it("a track recorded where it cannot be written (werift's own writes were an unhandled rejection, which ends the relay's process)", async () => {
    const engine = new WeriftEngine({ mediaIp: '127.0.0.1' });
    const errors: Error[] = [];
    const watch = escaped(500);
    const recorder = await engine.record(source('audio'), '', join(tmpdir(), 'tessera-no-such-dir', 'a', 'pub--microphone.webm'), (e) => errors.push(e));
    assert.equal(await watch, null, 'nothing escaped');
    assert.equal(errors.length, 1);
    assert.match(errors[0]!.message, /ENOENT/);
    await recorder.stop();
  });

  it('a write that fails midway (ENOSPC on /dev/full) is told once; what was taken after it is dropped; close settles', async () => {
    const errors: Error[] = [];
    const file = new WebmFile('/dev/full', (e) => errors.push(e));
    for (let i = 0; i < 5; i++) file.take({ saveToFile: Buffer.alloc(100, i) });
    file.take({ eol: { duration: 1, durationElement: new Uint8Array(8), header: Buffer.alloc(0) } });
    await file.close(1000);
    assert.equal(errors.length, 1);
    assert.match(errors[0]!.message, /ENOSPC/);
  });

  it("a recording of a track: the muxer's header is written through the relay's file, and stop() closes it", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-webm-'));
    try {
      const engine = new WeriftEngine({ mediaIp: '127.0.0.1' });
      const errors: Error[] = [];
      const path = join(dir, 'pub--camera.webm');
      const recorder = await engine.record(source('video'), '', path, (e) => errors.push(e));
      await new Promise((r) => setTimeout(r, 50));
      await recorder.stop();
      assert.deepEqual(errors, []);
      // an EBML header (1A 45 DF A3)
      assert.deepEqual([...readFileSync(path).subarray(0, 4)], [0x1a, 0x45, 0xdf, 0xa3]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
