import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Sdk } from '../src/sdk.ts';
import { SdkError } from '../src/errors.ts';
import { RemoteParticipant } from '../src/participants/remote-participant.ts';
import { rejectsWith, startTestRelay, type TestRelay } from './helpers.ts';

describe('the SDK misused from plain JavaScript: typed errors, never a TypeError or a storm', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(() => t.close());
  const token = (participantId: string) => t.token({ roomId: 'misuse', participantId, grant: { canPublishData: true, canSubscribeData: true } });

  it('a payload that is no JSON (a BigInt, a circular object) rejects the call INVALID_ARGUMENT (not-json); it threw a TypeError out of a promise-returning method', async () => {
    const room = await t.join({ token: token('a'), reconnect: false });
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    for (const payload of [10n, circular]) {
      let pending: Promise<unknown> | undefined;
      assert.doesNotThrow(() => {
        pending = room.pubsub.publish('chat', payload as never);
      });
      assert.equal((await rejectsWith(pending!, 'INVALID_ARGUMENT')).reason, 'not-json');
    }
    // the session goes on
    await room.pubsub.publish('chat', 'still here');
    await room.leave();
  });

  it('time options that are no positive number of ms are refused INVALID_ARGUMENT (heartbeatMs 0 reconnected every 300 ms; "abc" made a 1 ms timer; timeoutMs -1 failed as a TIMEOUT)', async () => {
    const bad: Array<Record<string, unknown>> = [
      { heartbeatMs: 0 },
      { heartbeatMs: 1 },
      { heartbeatMs: -5 },
      { heartbeatMs: 10n },
      { heartbeatMs: 'abc' },
      { timeoutMs: -1 },
      { timeoutMs: 'abc' },
      { timeoutMs: Number.NaN },
      { timeoutMs: 2 ** 40 },
      { reconnect: { maxTimeMs: 'x' } },
      { reconnect: { initialDelayMs: -1 } },
      { reconnect: { initialDelayMs: 0 } },
      { reconnect: { maxDelayMs: 0 } },
      { reconnect: 'yes' },
    ];
    for (const options of bad) {
      const err = await rejectsWith(Sdk.join({ url: t.url, token: token('b'), ...options } as never), 'INVALID_ARGUMENT');
      assert.match(err.message, /heartbeatMs|timeoutMs|reconnect/, Object.keys(options).join());
    }
    // `reconnect: true` is the default policy
    const room = await Sdk.join({ url: t.url, token: token('b'), reconnect: true } as never);
    await room.leave();
  });

  it('a listener or handler that is no function is refused at once, not when an event comes; unsubscribing after leave() resolves', async () => {
    const room = await t.join({ token: token('c'), reconnect: false });
    assert.throws(() => room.on('participant-joined', 'x' as never), (err: unknown) => err instanceof SdkError && err.code === 'INVALID_ARGUMENT');
    await rejectsWith(room.pubsub.subscribe('chat', 'nope' as never), 'INVALID_ARGUMENT');
    const unsubscribe = await room.pubsub.subscribe('chat', () => undefined);
    await room.leave();
    await unsubscribe();
  });

  it("a remote participant's tracks cannot be changed by the app (the SDK's own Map was handed out)", () => {
    const p = new RemoteParticipant({ id: 'x', name: 'x', joinedAt: 0 }, { remove: () => Promise.resolve() } as never);
    assert.throws(() => (p.tracks as Map<string, unknown>).set('camera', {}), /read-only/);
    assert.throws(() => (p.tracks as Map<string, unknown>).clear(), /read-only/);
    assert.equal(p.tracks.size, 0);
  });

  it('lobby.admit and deny of a list: none waiting resolves [] (the relay refused an empty list), a list past 100 goes in requests of 100, one decision each in order', async () => {
    const mod = await t.join({ token: t.token({ roomId: 'misuse', participantId: 'mod', grant: { canModerate: true } }), reconnect: false });
    assert.deepEqual(await mod.lobby.admit(mod.lobby.pending.map((r) => r.participantId)), []);
    assert.deepEqual(await mod.lobby.deny([]), []);
    const ids = Array.from({ length: 150 }, (_, i) => `w${i}`);
    const decisions = await mod.lobby.admit(ids);
    assert.deepEqual(decisions.map((d) => d.participantId), ids);
    assert.ok(decisions.every((d) => !d.ok && d.error.code === 'NOT_FOUND'));
    await mod.leave();
  });
});

