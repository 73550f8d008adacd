import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AsrLog, isMetadataLine } from './asr-log.ts';

const meta = (body: string) => `[Parsed_ametadata_5 @ 0x55d4c399d980] [info] ${body}`;
const frame = (us: number) => meta(`frame:64   pts:${us}   pts_time:1.79547e+09`);

describe('AsrLog', () => {
  it('an utterance runs from its first sound to where the silence after it began', () => {
    const log = new AsrLog(300_000, 1000);
    const lines = [
      frame(2_000_000), meta('lavfi.silence_start=1.79547e+09'),
      frame(4_000_000), meta('lavfi.silence_end=1.79547e+09'), meta('lavfi.silence_duration=2'),
      frame(6_800_000), meta('lavfi.silence_start=1.79547e+09'),
      frame(7_000_000),
    ];
    for (const line of lines) assert.equal(log.line(line), null);
    assert.deepEqual(log.line(meta('lavfi.asr.text=hello world ')), { text: 'hello world', startedAt: 4000, endedAt: 6500 });
  });

  it('an utterance ended by asr while sound goes on: the next starts there; empty text is no utterance', () => {
    const log = new AsrLog(300_000, 1000);
    log.line(frame(3_000_000));
    assert.deepEqual(log.line(meta('lavfi.asr.text=first')), { text: 'first', startedAt: 1000, endedAt: 3000 });
    log.line(frame(5_000_000));
    assert.equal(log.line(meta('lavfi.asr.text=')), null);
    log.line(frame(6_000_000));
    assert.deepEqual(log.line(meta('lavfi.asr.text=third')), { text: 'third', startedAt: 5000, endedAt: 6000 });
  });

  it('reads only ametadata lines', () => {
    const log = new AsrLog(300_000, 1000);
    assert.equal(log.line('[error] lavfi.asr.text=not metadata'), null);
    assert.ok(isMetadataLine(meta('lavfi.asr.text=x')));
    assert.ok(!isMetadataLine('[silencedetect @ 0x1] [info] silence_start: 2'));
  });
});
