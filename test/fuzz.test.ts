import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { fuzz } from './fuzz/run.ts';

/** The short fuzz run of `npm test`; `npm run fuzz` throws a million frames. */
describe('protocol fuzzing (short run)', () => {
  let t: TestRelay;
  const problems: unknown[] = [];
  const note = (e: unknown) => problems.push(e);
  before(async () => {
    process.on('unhandledRejection', note);
    process.on('uncaughtException', note);
    // the fuzzer tests parsing and state, not rate limits: no frame budget
    t = await startTestRelay({ messageBurst: 100_000, messageRate: 100_000, frameRate: 1_000_000, binaryFrameRate: 1_000_000 });
  });
  after(async () => {
    process.off('unhandledRejection', note);
    process.off('uncaughtException', note);
    await t.close();
  });

  it('20,000 generated frames: no crash, no unhandled error, a steady client unaffected, connections back to baseline', async () => {
    // its own room: the fuzzers hold canModerate and may end theirs, as they are allowed to
    const steady = await t.join({ token: t.token({ roomId: 'steady', participantId: 'steady', grant: { canPublishData: true } }) });
    let disconnected = '';
    steady.on('disconnected', ({ reason }) => (disconnected = reason));
    const report = await fuzz(t, steady, 20_000);
    assert.equal(report.frames, 20_000);
    assert.deepEqual(problems, [], 'no unhandled rejection or exception');
    assert.equal(disconnected, '', 'the steady client was never disconnected');
    assert.equal(report.steadyFailures, 0, 'every request of the steady client succeeded');
    assert.ok(report.steadyRoundTrips > 0);
    await until(() => t.relay.connections === 1, 5000, 'only the steady client left');
    const fresh = await t.join({ token: t.token({ roomId: 'after-fuzz', grant: {} }) });
    assert.equal(fresh.connected, true, 'the relay still admits');
  });
});
