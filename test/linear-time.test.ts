import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { fork } from 'node:child_process';
import { parseEntryFrame } from '../src/protocol/validate.ts';
import type { CASES } from './linear-time-child.ts';

/**
 * Whether `name` gets through `input` within `ms`, in a child process: a regular expression that
 * backtracks holds its thread for good (seconds to ages), and only a process of its own can be
 * ended from outside. The deadline is a hang's detector, orders of magnitude above the time these
 * take (well under a millisecond each), not a measure.
 */
async function finishes(name: keyof typeof CASES, input: string, ms = 1500): Promise<boolean> {
  const child = fork(new URL('./linear-time-child.ts', import.meta.url), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  try {
    await once(child, 'message'); // ready: its imports are done
    const done = once(child, 'message').then(() => true);
    child.send({ name, input });
    return await Promise.race([done, new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms).unref())]);
  } finally {
    child.kill('SIGKILL');
  }
}

const request = (params: Record<string, unknown>) => JSON.stringify({ type: 'request', id: 1, method: 'stream.open', params });

describe('inputs that made a pattern backtrack are parsed in linear time (one frame held the relay\'s event loop for good)', () => {
  it('a stream\'s mimeType of blanks between semicolons (2^n ways to refuse `a/b` + "; " × n + "é"), within the 256 characters a member may send', async () => {
    const mimeType = `a/b${'; '.repeat(126)}\u00e9`;
    assert.ok(mimeType.length <= 256);
    assert.ok(await finishes('frame', request({ size: 0, kind: 'text', mimeType })), 'the frame is parsed (and refused) at once');
  });

  it('before authentication only a join or a resume is looked into: a request\'s parameters are not parsed', () => {
    const mimeType = `a/b${'; '.repeat(126)}\u00e9`;
    const parsed = parseEntryFrame(request({ size: 0, kind: 'text', mimeType }));
    assert.deepEqual(parsed, { ok: false, problem: 'the first frame must be a join or resume frame' });
    assert.equal(parseEntryFrame('{"type":"ping"}').ok, false);
    assert.equal(parseEntryFrame('{"type":"resume","v":1,"credential":"c"}').ok, true);
  });

  it('an SDP candidate whose address is 60,000 colons (an IPv6 pattern took 5 s for it), within the 64 KiB an offer may hold', async () => {
    const sdp = ['v=0', 'o=- 1 1 IN IP4 0.0.0.0', 's=-', 't=0 0', 'm=video 9 UDP/TLS/RTP/SAVPF 96', `a=candidate:1 1 udp 2122260223 ${':'.repeat(60_000)}\u0000 50000 typ host`, ''].join('\r\n');
    assert.ok(sdp.length <= 64 * 1024);
    assert.ok(await finishes('sdp', sdp));
  });

  it('an address of 50,000 digits, and a relay URL of 100,000 slashes (the server SDK)', async () => {
    assert.ok(await finishes('address', `::${'0'.repeat(50_000)}`));
    assert.ok(await finishes('serviceUrl', `ws://h${'/'.repeat(100_000)}\u0000`));
    assert.ok(await finishes('serviceUrl', `ws://\u0000${'/'.repeat(100_000)}///T`));
  });
});
