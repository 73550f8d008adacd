import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UtteranceCutter, type Cut } from './utterance-cutter.ts';

const RATE = 100;
const OPTIONS = { sampleRate: RATE, silenceS: 0.5, minS: 0.3, maxS: 5, preRollS: 0.2 };
const meta = (body: string) => `[Parsed_ametadata_4 @ 0xabc] [info] ${body}`;
/** `n` samples whose values are their positions (so a cut shows where it came from). */
const samples = (from: number, n: number) => {
  const b = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) b.writeInt16LE(from + i, i * 2);
  return b;
};
const first = (cut: Cut) => cut.pcm.readInt16LE(0);
const last = (cut: Cut) => cut.pcm.readInt16LE(cut.pcm.length - 2);

describe('UtteranceCutter', () => {
  it('cuts from a little before the sound to where the silence began, once that audio has arrived', () => {
    const cuts: Cut[] = [];
    const cutter = new UtteranceCutter(OPTIONS, (c) => cuts.push(c), () => 10_000);
    cutter.line(meta('frame:1 pts:50 pts_time:0.5'));
    cutter.line(meta('lavfi.silence_start=0'));
    cutter.audio(samples(0, 300));
    cutter.line(meta('frame:2 pts:300 pts_time:3'));
    cutter.line(meta('lavfi.silence_end=3'));
    // the end is marked (silence from 500, told at 550) before its audio arrives
    cutter.line(meta('frame:3 pts:550 pts_time:5.5'));
    cutter.line(meta('lavfi.silence_start=5'));
    assert.equal(cuts.length, 0);
    cutter.audio(samples(300, 301));
    assert.equal(cuts.length, 1);
    assert.deepEqual([first(cuts[0]!), last(cuts[0]!)], [280, 499]);
    assert.deepEqual([cuts[0]!.startedAt, cuts[0]!.endedAt], [10_000 - 3210, 10_000 - 1010]);
  });

  it('drops what is too short and cuts what is too long', () => {
    const cuts: Cut[] = [];
    const cutter = new UtteranceCutter(OPTIONS, (c) => cuts.push(c));
    cutter.audio(samples(0, 20));
    cutter.line(meta('frame:1 pts:70 pts_time:0.7'));
    cutter.line(meta('lavfi.silence_start=0.2'));
    assert.equal(cuts.length, 0, '0.2 s from the start: under the minimum');
    cutter.audio(samples(20, 80));
    cutter.line(meta('frame:2 pts:100 pts_time:1'));
    cutter.line(meta('lavfi.silence_end=1'));
    for (let at = 100; at < 1000; at += 100) cutter.audio(samples(at, 100));
    assert.equal(cuts.length, 1, 'five seconds: cut');
    assert.deepEqual([first(cuts[0]!), last(cuts[0]!)], [80, 599], "at the first chunk past five seconds");
  });
});
