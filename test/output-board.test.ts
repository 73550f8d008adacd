import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { OutputInfo, OutputName, OutputStatus } from '../src/protocol/control.ts';
import { effectiveGrant, type Grant } from '../src/protocol/grant.ts';
import type { ServerFrame } from '../src/protocol/messages.ts';
import { RelayError } from '../relay/errors.ts';
import { createLogger } from '../relay/log.ts';
import { OutputBoard, type OutputContext, type OutputProvider, type ProviderFactories } from '../relay/outputs/board.ts';
import { OutputStarts } from '../relay/outputs/output-starts.ts';
import { Timeline } from '../relay/rooms/timeline.ts';
import type { Member } from '../relay/rooms/types.ts';
import { nextEvent, rejectsWith, startTestRelay, until } from './helpers.ts';

/** A room as the board sees it: every frame it sends, to whom. */
function fakeRoom(members: Array<{ id: string; grant: Grant }> = []) {
  const sent: Array<{ to: string; frame: ServerFrame }> = [];
  const all = members.map((m) => ({ id: m.id, grant: effectiveGrant(m.grant) }) as Member);
  const ctx: OutputContext = {
    project: 'p',
    roomId: 'r',
    timeline: new Timeline(),
    log: createLogger('silent'),
    nameOf: (id) => id,
    broadcast: (frame) => {
      for (const m of all) sent.push({ to: m.id, frame });
    },
    // no members' next frames here to wait for: sent at once, like broadcast
    broadcastLazy: (frame) => ctx.broadcast(frame),
    broadcastRaw: (data) => {
      for (const m of all) sent.push({ to: m.id, frame: JSON.parse(String(data)) as ServerFrame });
    },
    broadcastSplit: (full, reduced, sees) => {
      for (const m of all) {
        const frame = sees(m) ? full : reduced;
        if (frame) sent.push({ to: m.id, frame });
      }
    },
    tapMedia: () => () => {},
  };
  const changes = (to: string) =>
    sent.filter((s) => s.to === to && s.frame.type === 'event' && s.frame.name === 'output-changed').map((s) => (s.frame as { data: OutputStatus & { output: OutputName } }).data);
  return { ctx, changes };
}

/** A provider whose start is decided by the test; counts its stops. */
function scripted(start: () => Promise<OutputInfo[OutputName] | void>) {
  const made: Array<{ stops: number }> = [];
  const factory = (): OutputProvider<never> => {
    const record = { stops: 0 };
    made.push(record);
    const provider: OutputProvider<never> = {
      start: () => start() as Promise<never>,
      stop: async () => {
        record.stops++;
      },
    };
    return provider;
  };
  return { factory, made };
}

const TARGET = { url: 'rtmp://example.com/live/key' };
const never = () => new Promise<never>(() => {});
type Factory = () => OutputProvider<never>;
const factories = (livestream: Factory, hls: Factory = livestream): ProviderFactories => ({ recording: livestream, hls, livestream, transcription: livestream, whiteboard: livestream });

describe('output board: deadlines, cancellation, who sees the HLS URL', { timeout: 20_000 }, () => {
  it('outputs: a provider that never starts is failed after the deadline', async () => {
    const { ctx, changes } = fakeRoom([{ id: 'a', grant: {} }]);
    const { factory, made } = scripted(never);
    const board = new OutputBoard(ctx, factories(factory), { startTimeoutMs: 100 });
    const began = Date.now();
    await assert.rejects(board.start('livestream', 'host', TARGET), (err: RelayError) => err.code === 'TIMEOUT' && err.reason === 'start-timeout');
    assert.ok(Date.now() - began < 1000);
    assert.equal(board.statuses().livestream.state, 'failed');
    assert.equal(board.statuses().livestream.error?.reason, 'start-timeout');
    await until(() => made[0]!.stops === 1, 1000, 'the provider stopped');
    assert.deepEqual(changes('a').map((c) => c.state), ['starting', 'failed']);
    // and it can be started again
    await assert.rejects(board.start('livestream', 'host', TARGET), (err: RelayError) => err.reason === 'start-timeout');
    assert.equal(made.length, 2);
  });

  it('outputs: a start refused for its arguments (INVALID_ARGUMENT: a bad URL, a private target) leaves the output as it was, not failed for the whole room', async () => {
    const { ctx, changes } = fakeRoom([{ id: 'a', grant: {} }]);
    const { factory } = scripted(() => Promise.reject(new RelayError('INVALID_ARGUMENT', 'the livestream URL must be rtmp:// or rtmps://', 'bad-url')));
    const board = new OutputBoard(ctx, factories(factory), { startTimeoutMs: 1000 });
    await assert.rejects(board.start('livestream', 'host', { url: 'ftp://x' }), (err: RelayError) => err.code === 'INVALID_ARGUMENT' && err.reason === 'bad-url');
    assert.deepEqual(board.statuses().livestream, { state: 'stopped' });
    assert.deepEqual(changes('a').map((c) => c.state), ['starting', 'stopped']);
    // a provider's own failure is still the room's to see
    const failing = scripted(() => Promise.reject(new RelayError('INTERNAL_ERROR', 'ffmpeg died', 'ffmpeg-failed')));
    const other = new OutputBoard(ctx, factories(failing.factory), { startTimeoutMs: 1000 });
    await assert.rejects(other.start('livestream', 'host', TARGET));
    assert.equal(other.statuses().livestream.state, 'failed');
  });

  it('outputs: a start that ends after its deadline is stopped again', async () => {
    const { ctx } = fakeRoom();
    let finish = () => {};
    const { factory, made } = scripted(() => new Promise<void>((resolve) => (finish = resolve)));
    const board = new OutputBoard(ctx, factories(factory), { startTimeoutMs: 50 });
    await assert.rejects(board.start('livestream', 'host', TARGET), (err: RelayError) => err.reason === 'start-timeout');
    await until(() => made[0]!.stops === 1);
    finish();
    await until(() => made[0]!.stops === 2, 1000, 'what the late start built is let go');
    assert.equal(board.statuses().livestream.state, 'failed');
  });

  it('outputs: starts of one output are a budget per minute (a start and stop in a loop would run ffmpeg and make a directory each time)', async () => {
    const { ctx, changes } = fakeRoom([{ id: 'a', grant: {} }]);
    const { factory, made } = scripted(async () => undefined);
    const board = new OutputBoard(ctx, factories(factory), { startTimeoutMs: 1_000, starts: new OutputStarts(3) });
    for (let i = 0; i < 3; i++) {
      await board.start('livestream', 'host', TARGET);
      await board.stop('livestream', 'host');
    }
    const before = changes('a').length;
    await assert.rejects(board.start('livestream', 'host', TARGET), (err: RelayError) => err.code === 'RATE_LIMITED' && err.reason === 'output-rate');
    assert.equal(made.length, 3, 'no provider made for the refused start');
    assert.equal(changes('a').length, before, 'nobody is told of a refused start');
    assert.equal(board.statuses().livestream.state, 'stopped');
    // another output of the room has its own budget; a start refused as already active spends none
    await board.start('recording', 'host', undefined);
    await assert.rejects(board.start('recording', 'host', undefined), (err: RelayError) => err.reason === 'output-already-active');
    await board.stop('recording', 'host');
    await board.start('recording', 'host', undefined);
    await board.stop('recording', 'host');
    await board.start('recording', 'host', undefined);
  });

  it('outputs: the start budget outlives the room (a member alone leaving and rejoining does not get a fresh one)', async () => {
    const small = await startTestRelay({ outputStarts: 2 });
    try {
      const token = small.token({ roomId: 'starts', participantId: 'host', grant: { canWhiteboard: true } });
      for (let round = 0; round < 2; round++) {
        const host = await small.join({ token });
        await host.whiteboard.start();
        await host.whiteboard.stop();
        await host.leave();
        await until(() => small.relay.context.rooms.get('default', 'starts') === undefined, 2000, 'the empty room is gone');
      }
      const host = await small.join({ token });
      const err = await rejectsWith(host.whiteboard.start(), 'RATE_LIMITED');
      assert.equal(err.reason, 'output-rate');
      const other = await small.join({ token: small.token({ roomId: 'other', participantId: 'host', grant: { canWhiteboard: true } }) });
      await other.whiteboard.start();
      await Promise.all([host.leave(), other.leave()]);
    } finally {
      await small.close();
    }
  });

  it('outputs: stop while starting', async () => {
    const { ctx, changes } = fakeRoom([{ id: 'a', grant: {} }]);
    const { factory, made } = scripted(never);
    const board = new OutputBoard(ctx, factories(factory), { startTimeoutMs: 10_000 });
    const starting = board.start('livestream', 'host', TARGET);
    const refused = assert.rejects(starting, (err: RelayError) => err.code === 'INVALID_STATE' && err.reason === 'output-stopped');
    const status = await board.stop('livestream', 'mod');
    assert.deepEqual(status, { state: 'stopped', by: 'mod' });
    await refused;
    assert.equal(made[0]!.stops, 1);
    assert.deepEqual(changes('a').map((c) => c.state), ['starting', 'stopping', 'stopped']);
    await assert.rejects(board.stop('livestream', 'mod'), (err: RelayError) => err.reason === 'output-not-active');
  });

  it('item 18: the HLS URL reaches only canSubscribe/canHls members (board)', async () => {
    const { ctx, changes } = fakeRoom([
      { id: 'viewer', grant: {} },
      { id: 'data-only', grant: { canPublishData: true, canSubscribeData: true } },
      { id: 'sub', grant: { canSubscribe: true } },
      { id: 'hls', grant: { canHls: true } },
    ]);
    const info = { playlist: '/hls/p/secret-run-id/index.m3u8' };
    const { factory } = scripted(async () => info);
    const board = new OutputBoard(ctx, factories(factory), { startTimeoutMs: 1000 });
    const status = await board.start('hls', 'hls', {});
    assert.deepEqual(status.info, info, 'the starter (canHls) gets the URL');
    for (const who of ['sub', 'hls']) assert.deepEqual(changes(who).at(-1), { output: 'hls', state: 'active', by: 'hls', info }, who);
    for (const who of ['viewer', 'data-only']) assert.deepEqual(changes(who).at(-1), { output: 'hls', state: 'active', by: 'hls' }, who);
    assert.deepEqual(board.statuses(effectiveGrant({ canSubscribe: true })).hls.info, info);
    assert.deepEqual(board.statuses(effectiveGrant({ canHls: true })).hls.info, info);
    assert.equal(board.statuses(effectiveGrant({})).hls.info, undefined);
    assert.equal(board.statuses(effectiveGrant({})).hls.state, 'active');
    // other outputs' info is everyone's
    await board.start('recording', 'hls', {});
    assert.deepEqual(changes('viewer').at(-1), { output: 'recording', state: 'active', by: 'hls', info });
    assert.deepEqual(board.statuses(effectiveGrant({})).recording.info, info);
  });

  it('item 18: the HLS URL reaches only canSubscribe/canHls members (through the relay)', async () => {
    const t = await startTestRelay();
    try {
      const starter = await t.join({ token: t.token({ roomId: 'h18', participantId: 'starter', grant: { canHls: true } }) });
      const sub = await t.join({ token: t.token({ roomId: 'h18', participantId: 'sub', grant: { canSubscribe: true } }) });
      const viewer = await t.join({ token: t.token({ roomId: 'h18', participantId: 'viewer', isViewer: true, grant: {} }) });
      const seen = { sub: nextEvent(sub, 'output-changed'), viewer: nextEvent(viewer, 'output-changed') };
      const active = (room: typeof sub) => until(() => room.hls.state === 'active', 5000, 'hls active');
      const status = await starter.hls.start();
      assert.ok(status.info?.playlist);
      await Promise.all([active(sub), active(viewer)]);
      await Promise.all([seen.sub, seen.viewer]); // the 'starting' events
      assert.equal(sub.hls.status.info?.playlist, status.info.playlist);
      assert.equal(viewer.hls.status.info, undefined, 'the viewer sees the state without the URL');
      const late = await t.join({ token: t.token({ roomId: 'h18', participantId: 'late', isViewer: true, grant: {} }) });
      assert.equal(late.hls.state, 'active');
      assert.equal(late.hls.status.info, undefined, 'a late viewer neither');
      const lateSub = await t.join({ token: t.token({ roomId: 'h18', participantId: 'late-sub', grant: { canSubscribe: true } }) });
      assert.equal(lateSub.hls.status.info?.playlist, status.info.playlist);
      await starter.hls.stop();
    } finally {
      await t.close();
    }
  });

  it('outputs: rejects a start of a starting output, and nothing is left after dispose', async () => {
    const { ctx } = fakeRoom();
    const { factory, made } = scripted(never);
    const board = new OutputBoard(ctx, factories(factory), { startTimeoutMs: 10_000 });
    const starting = board.start('livestream', 'host', TARGET);
    const settled = assert.rejects(starting, (err: RelayError) => err.reason === 'output-stopped');
    await assert.rejects(board.start('livestream', 'host', TARGET), (err: RelayError) => err.reason === 'output-already-active');
    await board.dispose();
    await settled;
    assert.equal(made[0]!.stops, 1);
  });
});
