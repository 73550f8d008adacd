import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { createLogger } from '../log.ts';
import { Timeline } from '../rooms/timeline.ts';
import type { OutputContext } from './board.ts';
import { HlsProvider } from './hls.ts';
import { mediaOutputsRunning } from './media-stops.ts';
import { RecordingProvider } from './recording.ts';

const dir = mkdtempSync(join(tmpdir(), 'tessera-start-stop-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function context(): OutputContext {
  return {
    project: 'p',
    roomId: 'r',
    timeline: new Timeline(),
    nameOf: (id) => id,
    log: createLogger('silent'),
    broadcast: () => undefined,
    broadcastLazy: () => undefined,
    broadcastRaw: () => undefined,
    broadcastSplit: () => undefined,
    tapMedia: () => () => undefined,
  };
}

describe('a media output stopped while it starts', () => {
  for (const output of ['recording', 'hls'] as const) {
    it(`${output}: counts as running until its start has cleaned up, not only until the stop answered (closing the relay waits for it)`, async () => {
      const owner = {};
      const failed = () => undefined;
      const provider =
        output === 'recording'
          ? new RecordingProvider(context(), join(dir, 'rec'), failed, { owner })
          : new HlsProvider(context(), join(dir, 'hls'), failed, { owner, segmentSeconds: 2 });
      const start = provider.start(undefined);
      const startSettled = start.then(
        () => 'started',
        (err: { reason?: string }) => err.reason ?? 'failed',
      );
      let startDone = false;
      void startSettled.then(() => (startDone = true));
      // the stop runs while the start awaits its directory, and answers first
      await provider.stop();
      assert.equal(startDone, false, 'the start is still under way');
      assert.equal(mediaOutputsRunning(owner), 1, 'the start still counts as a running output');
      assert.equal(await startSettled, 'output-stopped');
      assert.equal(mediaOutputsRunning(owner), 0, 'given back once the start has cleaned up');
    });
  }
});
