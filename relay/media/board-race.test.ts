import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Source } from '../../src/protocol/grant.ts';
import type { TrackKind } from '../../src/protocol/media.ts';
import type { ServerFrame } from '../../src/protocol/messages.ts';
import type { LogFields, Logger } from '../log.ts';
import type { Member } from '../rooms/types.ts';
import { MAX_SUBSCRIPTIONS, MediaBoard } from './board.ts';
import { PublishFailure, type MediaEngine, type PublishTransport, type SubscribeTransport, type TrackSource } from './engine.ts';

/**
 * The board's handling of concurrency, with an engine whose every step the test releases by
 * hand: the interleavings that lost a camera in issue 16 are played exactly, in every order.
 */

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

const source = (kind: TrackKind): TrackSource => ({ kind, liveLayers: () => [], onPacket: () => () => undefined, onRtp: () => () => undefined, requestKeyFrame: () => undefined });

/** A publish transport the test drives: `connect()` announces it, `fail()` makes it fail to start. */
class FakePublish implements PublishTransport {
  readonly answer = 'v=0 answer';
  private readonly started = deferred<TrackSource>();
  readonly track = this.started.promise;
  closed = false;
  private readonly onClose: Array<() => void> = [];
  constructor(readonly kind: TrackKind) {}
  connect = () => this.started.resolve(source(this.kind));
  fail = (reason: PublishFailure['reason']) => this.started.reject(new PublishFailure(reason, `test: ${reason}`));
  onClosed = (l: () => void) => void this.onClose.push(l);
  stats = () => ({ packets: 0, bytes: 0, nacks: 0, keyFrameRequests: 0 });
  close = () => {
    if (this.closed) return;
    this.closed = true;
    this.fail('transport-failed');
    for (const l of this.onClose) l();
  };
}

class FakeSubscribe implements SubscribeTransport {
  readonly offer = 'v=0 offer';
  readonly layer = '';
  closed = false;
  accept = async () => undefined;
  attach = () => undefined;
  switchLayer = () => undefined;
  onClosed = () => undefined;
  stats = () => ({ packets: 0, bytes: 0, nacks: 0, keyFrameRequests: 0 });
  close = () => void (this.closed = true);
}

/** Each engine call waits until the test releases it: `publishes[i].release()` hands back its transport. */
class StepEngine implements MediaEngine {
  readonly publishes: Array<{ transport: FakePublish; release: () => void }> = [];
  readonly subscribes: Array<{ transport: FakeSubscribe; release: () => void; fail: () => void }> = [];
  publish(kind: TrackKind): Promise<PublishTransport> {
    const step = deferred<PublishTransport>();
    const transport = new FakePublish(kind);
    this.publishes.push({ transport, release: () => step.resolve(transport) });
    return step.promise;
  }
  subscribe(): Promise<SubscribeTransport> {
    const step = deferred<SubscribeTransport>();
    const transport = new FakeSubscribe();
    this.subscribes.push({ transport, release: () => step.resolve(transport), fail: () => step.reject(new Error('test: the engine failed')) });
    return step.promise;
  }
  record(): never {
    throw new Error('not in this test');
  }
}

function member(id: string): Member & { frames: ServerFrame[] } {
  const frames: ServerFrame[] = [];
  const link = { send: (f: ServerFrame) => void frames.push(f), sendRaw: () => undefined, sendBinary: () => undefined, close: () => undefined, bufferedAmount: 0 };
  // only what the board reads: its id and its link
  return { id, name: id, link, frames } as unknown as Member & { frames: ServerFrame[] };
}

function setup() {
  const engine = new StepEngine();
  const broadcasts: ServerFrame[] = [];
  const lines: Array<{ level: string; msg: string; fields?: LogFields }> = [];
  const at = (level: string) => (msg: string, fields?: LogFields) => void lines.push({ level, msg, ...(fields ? { fields } : {}) });
  const log: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  const board = new MediaBoard(engine, { broadcast: (f) => void broadcasts.push(f), log });
  return { engine, board, broadcasts, lines };
}

const tick = () => new Promise((r) => setImmediate(r));

/** `a`'s camera, published and connected (the engine's steps released). */
async function publishedCamera(engine: StepEngine, board: MediaBoard, a: Member): Promise<void> {
  const cam = board.publish(a, 'camera', 'video', 'v=0 offer');
  await tick();
  engine.publishes.at(-1)!.release();
  await cam;
  engine.publishes.at(-1)!.transport.connect();
  await tick();
}
const published = (frames: ServerFrame[]) => frames.filter((f) => f.type === 'event' && f.name === 'track-published').map((f) => (f as { data: { source: Source } }).data.source).sort();

describe('media board: concurrent publications (issue 16)', () => {
  for (const order of [[0, 1], [1, 0]]) {
    it(`two first publications negotiated at once are both kept and announced (answers in order ${order.join(', ')})`, async () => {
      const { engine, board, broadcasts } = setup();
      const a = member('a');
      const camera = board.publish(a, 'camera', 'video', 'v=0 offer');
      const mic = board.publish(a, 'microphone', 'audio', 'v=0 offer');
      await tick();
      assert.equal(engine.publishes.length, 2);
      for (const i of order) engine.publishes[i]!.release();
      await Promise.all([camera, mic]);
      for (const p of engine.publishes) p.transport.connect();
      await tick();
      assert.deepEqual(published(broadcasts), ['camera', 'microphone'], 'both announced');
      assert.deepEqual(board.tracksOf(a).map((t) => t.source).sort(), ['camera', 'microphone']);
      assert.equal(board.stats().publications, 2);
      board.memberLeft(a);
      assert.ok(engine.publishes.every((p) => p.transport.closed), 'no transport left open');
    });
  }

  it('camera, microphone and screen at once, answered in reverse, all kept', async () => {
    const { engine, board, broadcasts } = setup();
    const a = member('a');
    const all = (['camera', 'microphone', 'screen'] as const).map((s) => board.publish(a, s, s === 'microphone' ? 'audio' : 'video', 'v=0 offer'));
    await tick();
    for (const p of [...engine.publishes].reverse()) p.release();
    await Promise.all(all);
    for (const p of engine.publishes) p.transport.connect();
    await tick();
    assert.deepEqual(published(broadcasts), ['camera', 'microphone', 'screen']);
  });

  it('a second publish of a source being negotiated is refused; the first goes on', async () => {
    const { engine, board } = setup();
    const a = member('a');
    const first = board.publish(a, 'camera', 'video', 'v=0 offer');
    await assert.rejects(board.publish(a, 'camera', 'video', 'v=0 offer'), { reason: 'already-published' });
    await tick();
    engine.publishes[0]!.release();
    assert.equal(await first, 'v=0 answer');
    assert.equal(engine.publishes.length, 1);
  });

  it('unpublished, or its publisher gone, while negotiated: the transport is closed and nothing is announced', async () => {
    const { engine, board, broadcasts } = setup();
    const a = member('a');
    const cam = board.publish(a, 'camera', 'video', 'v=0 offer');
    const mic = board.publish(a, 'microphone', 'audio', 'v=0 offer');
    await tick();
    board.unpublish(a, 'camera');
    engine.publishes[0]!.release();
    await assert.rejects(cam, { code: 'NOT_FOUND' });
    assert.equal(engine.publishes[0]!.transport.closed, true);
    board.memberLeft(a);
    engine.publishes[1]!.release();
    await assert.rejects(mic, { code: 'NOT_FOUND' });
    assert.equal(engine.publishes[1]!.transport.closed, true);
    assert.deepEqual(board.stats(), { ...board.stats(), publications: 0, subscriptions: 0, negotiating: 0 });
    assert.deepEqual(published(broadcasts), []);
  });

  it('a publication that fails to start: logged at info with its reason, and its publisher is told at once', async () => {
    const { engine, board, broadcasts, lines } = setup();
    const a = member('a');
    const cam = board.publish(a, 'camera', 'video', 'v=0 offer');
    await tick();
    engine.publishes[0]!.release();
    await cam;
    engine.publishes[0]!.transport.fail('not-connected');
    await tick();
    const line = lines.find((l) => l.level === 'info' && l.msg === 'media: publication failed to start');
    assert.ok(line, JSON.stringify(lines));
    assert.deepEqual([line.fields?.participant, line.fields?.source, line.fields?.reason], ['a', 'camera', 'not-connected']);
    assert.deepEqual(a.frames, [{ type: 'event', name: 'track-unpublished', data: { participantId: 'a', source: 'camera' } }]);
    assert.deepEqual(broadcasts, [], 'never announced: the others hear nothing');
    assert.equal(engine.publishes[0]!.transport.closed, true);
    assert.equal(board.stats().publications, 0);
  });

  it('a started publication whose transport fails: info log, publisher told, subscribers told', async () => {
    const { engine, board, broadcasts, lines } = setup();
    const a = member('a');
    const b = member('b');
    const cam = board.publish(a, 'camera', 'video', 'v=0 offer');
    await tick();
    engine.publishes[0]!.release();
    await cam;
    engine.publishes[0]!.transport.connect();
    await tick();
    const sub = board.subscribe(b, a, 'camera');
    await tick();
    engine.subscribes[0]!.release();
    await sub;
    engine.publishes[0]!.transport.close();
    assert.ok(lines.some((l) => l.level === 'info' && l.msg === 'media: publication failed' && l.fields?.reason === 'transport-failed'));
    assert.deepEqual(a.frames.map((f) => f.type === 'event' && f.name), ['track-unpublished']);
    assert.deepEqual(b.frames.map((f) => f.type === 'event' && f.name), ['subscription-ended']);
    assert.deepEqual(broadcasts.map((f) => f.type === 'event' && f.name), ['track-published', 'track-unpublished']);
    assert.equal(engine.subscribes[0]!.transport.closed, true);
  });

  it('a subscription whose publication ends, or whose subscriber leaves, while the engine works is closed', async () => {
    const { engine, board } = setup();
    const a = member('a');
    const b = member('b');
    await publishedCamera(engine, board, a);
    const left = board.subscribe(b, a, 'camera');
    await tick();
    board.memberLeft(b); // a resume: b lives on, its transports are gone
    engine.subscribes[0]!.release();
    await assert.rejects(left, { code: 'NOT_FOUND' });
    const again = board.subscribe(b, a, 'camera');
    await tick();
    board.unpublish(a, 'camera');
    engine.subscribes[1]!.release();
    await assert.rejects(again, { code: 'NOT_FOUND' });
    assert.ok(engine.subscribes.every((s) => s.transport.closed));
    assert.equal(board.stats().subscriptions, 0);
  });

  it("a member's new subscription to a publication supersedes its last one, closed and told subscription-ended (50 of one camera, each NACKing all the sender keeps, made the relay send 700 times what it was asked)", async () => {
    const { engine, board } = setup();
    const a = member('a');
    const b = member('b');
    await publishedCamera(engine, board, a);
    const first = board.subscribe(b, a, 'camera');
    await tick();
    engine.subscribes.at(-1)!.release();
    const { subscriptionId } = await first;
    const second = board.subscribe(b, a, 'camera');
    await tick();
    engine.subscribes.at(-1)!.release();
    const next = await second;
    assert.notEqual(next.subscriptionId, subscriptionId);
    assert.equal(board.stats().subscriptions, 1);
    assert.equal(engine.subscribes[0]!.transport.closed, true);
    assert.deepEqual(b.frames.filter((f) => f.type === 'event' && f.name === 'subscription-ended').map((f) => (f as { data: { subscriptionId: string } }).data.subscriptionId), [subscriptionId]);
    // another member's subscription is its own
    const c = member('c');
    const third = board.subscribe(c, a, 'camera');
    await tick();
    engine.subscribes.at(-1)!.release();
    await third;
    assert.equal(board.stats().subscriptions, 2);
  });

  it('two subscriptions of a member to a publication that the engine finishes out of order: the newer request is the one kept, the older gives way (replaced)', async () => {
    const { engine, board } = setup();
    const a = member('a');
    const b = member('b');
    await publishedCamera(engine, board, a);
    const older = board.subscribe(b, a, 'camera').then((r) => r.subscriptionId, (err: { reason?: string }) => `refused ${err.reason}`);
    await tick();
    const newer = board.subscribe(b, a, 'camera');
    await tick();
    engine.subscribes[1]!.release();
    const kept = (await newer).subscriptionId;
    engine.subscribes[0]!.release();
    assert.equal(await older, 'refused replaced');
    assert.equal(engine.subscribes[0]!.transport.closed, true);
    assert.equal(board.stats().subscriptions, 1);
    assert.deepEqual(b.frames.filter((f) => f.type === 'event' && f.name === 'subscription-ended'), [], `${kept} was not ended`);
  });

  it('subscriptions still negotiating count against the cap: concurrent requests cannot hold more transports than it', async () => {
    const { engine, board } = setup();
    const a = member('a');
    const b = member('b');
    await publishedCamera(engine, board, a);
    const asked = Array.from({ length: MAX_SUBSCRIPTIONS * 2 }, () => board.subscribe(b, a, 'camera').then(() => 'ok', (err: { reason?: string }) => err.reason ?? 'error'));
    await tick();
    assert.equal(engine.subscribes.length, MAX_SUBSCRIPTIONS, 'the engine was asked for no more transports than the cap');
    for (const s of engine.subscribes) s.release();
    const outcomes = await Promise.all(asked);
    // all of one publication: the newest of those taken is kept, the others give way
    assert.equal(outcomes.filter((o) => o === 'ok').length, 1);
    assert.equal(outcomes.filter((o) => o === 'replaced').length, MAX_SUBSCRIPTIONS - 1);
    assert.equal(outcomes.filter((o) => o === 'too-many-subscriptions').length, MAX_SUBSCRIPTIONS);
    assert.equal(board.stats().subscriptions, 1);
    assert.equal(engine.subscribes.filter((s) => !s.transport.closed).length, 1, 'the transports that gave way are closed');
    // a subscriber that leaves gives its places back, and so does a negotiation the engine fails
    board.memberLeft(b);
    const failed = board.subscribe(b, a, 'camera');
    await tick();
    engine.subscribes.at(-1)!.fail();
    await assert.rejects(failed);
    const again = Array.from({ length: MAX_SUBSCRIPTIONS }, () => board.subscribe(b, a, 'camera'));
    await tick();
    for (const s of engine.subscribes.slice(-MAX_SUBSCRIPTIONS)) s.release();
    const settled = await Promise.allSettled(again);
    // all of them taken (the newest kept, the others giving way): the failed one holds no place
    assert.equal(settled.filter((r) => r.status === 'rejected' && (r.reason as { reason?: string }).reason === 'too-many-subscriptions').length, 0, 'the failed one holds no place');
    assert.equal(settled.filter((r) => r.status === 'fulfilled').length, 1);
  });
});

describe('media board: taps (outputs that follow every publication)', () => {
  it('a tap that stops lets go of what it left with each live publication: a start and stop in a loop keeps nothing; a tap still on is cleaned up when the publication ends', async () => {
    const { engine, board } = setup();
    const a = member('a');
    await publishedCamera(engine, board, a);
    const inside = (board as unknown as { published: Map<Member, Map<Source, { tapped: { size: number } }>> }).published.get(a)!.get('camera')!;
    let stoppedCleanups = 0;
    for (let i = 0; i < 500; i++) {
      const untap = board.tap(() => () => void stoppedCleanups++);
      untap();
      untap();
    }
    // it kept one closure a cycle (and the stopped output each held) until the camera went
    assert.equal(inside.tapped.size, 0);
    assert.equal(stoppedCleanups, 0, "a stopped tap's owner ends its own tracks: nothing is called for it");
    let live = 0;
    board.tap(() => () => void live++);
    assert.equal(inside.tapped.size, 1);
    board.memberLeft(a);
    assert.equal(live, 1, 'the tap still on is told the publication ended');
  });
});
