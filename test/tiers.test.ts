import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Room } from '../src/room.ts';
import type { RemoteParticipant } from '../src/participants/remote-participant.ts';
import { nextEvent, rejectsWith, ROOM_GRANT, startTestRelay, until, type TestRelay } from './helpers.ts';

const WINDOW = 100;

describe('tiers: stage roster, audience counts, paging', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ countIntervalMs: WINDOW });
  });
  after(() => t.close());

  const speaker = (room: string, id: string) => t.join({ token: t.token({ roomId: room, participantId: id, grant: ROOM_GRANT }), name: id.toUpperCase() });
  const viewer = (room: string, id?: string) =>
    t.join({ token: t.token({ roomId: room, grant: { canSubscribe: true }, isViewer: true, ...(id ? { participantId: id } : {}) }) });
  const leaveAll = (rooms: Room[]) => Promise.all(rooms.map((r) => r.leave()));

  it('speakers and viewers see the same stage; viewers are never rostered', async () => {
    const a = await speaker('t1', 'a');
    const v1 = await viewer('t1', 'v1');
    const b = await speaker('t1', 'b');
    const v2 = await viewer('t1', 'v2');
    await until(() => a.remoteParticipants.size === 1 && v1.remoteParticipants.size === 2 && v2.remoteParticipants.size === 2);
    assert.deepEqual([...a.remoteParticipants.keys()], ['b']);
    assert.deepEqual([...b.remoteParticipants.keys()], ['a']);
    assert.deepEqual([...v1.remoteParticipants.keys()], ['a', 'b']);
    assert.deepEqual([...v2.remoteParticipants.keys()], ['a', 'b'], 'a late viewer gets the stage in join order');
    const p = v2.remoteParticipants.get('a')!;
    assert.equal(p.name, 'A');
    assert.ok(p.joinedAt <= Date.now() && p.joinedAt > Date.now() - 10_000);
    await until(() => a.participantCount.total === 4 && v1.participantCount.total === 4);
    for (const r of [a, b, v1, v2]) assert.deepEqual(r.participantCount, { speaker: 2, viewer: 2, total: 4 });
    // issue 12: a Map, read-only
    assert.ok(a.remoteParticipants instanceof Map, 'instanceof Map');
    const map = a.remoteParticipants as Map<string, RemoteParticipant>;
    assert.throws(() => map.set('x', p), TypeError);
    assert.throws(() => map.delete('b'), TypeError);
    assert.throws(() => map.clear(), TypeError);
    assert.deepEqual([...a.remoteParticipants.keys()], ['b'], 'unchanged by the attempts');
    await leaveAll([a, b, v1, v2]);
  });

  it('participant-joined is retroactive for late handlers, exactly once each; participant-left is not', async () => {
    const observer = await viewer('t2');
    const early: string[] = [];
    observer.on('participant-joined', ({ participant }) => early.push(participant.id));
    const s1 = await speaker('t2', 's1');
    const s2 = await speaker('t2', 's2');
    await until(() => early.length === 2);
    const late: string[] = [];
    const lateHandler = ({ participant }: { participant: RemoteParticipant }) => late.push(participant.id);
    observer.on('participant-joined', lateHandler);
    observer.on('participant-joined', lateHandler); // added twice: still once per participant
    assert.deepEqual(late, [], 'replay happens after on() returns');
    await Promise.resolve();
    assert.deepEqual(late, ['s1', 's2'], 'existing ones first, in join order');
    const lefts: string[] = [];
    observer.on('participant-left', ({ participant }) => lefts.push(participant.id));
    const s3 = await speaker('t2', 's3');
    await until(() => late.length === 3 && early.length === 3);
    assert.deepEqual(late, ['s1', 's2', 's3']);
    assert.deepEqual(early, ['s1', 's2', 's3']);
    await s1.leave();
    await until(() => lefts.length === 1);
    assert.deepEqual(lefts, ['s1']);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(late, ['s1', 's2', 's3'], 'nothing delivered twice');
    await leaveAll([observer, s2, s3]);
  });

  it('viewers joining and leaving change the counts but fire no participant events', async () => {
    const s = await speaker('t3', 'host');
    let participantEvents = 0;
    s.on('participant-joined', () => participantEvents++);
    s.on('participant-left', () => participantEvents++);
    const viewers = await Promise.all(Array.from({ length: 20 }, () => viewer('t3')));
    await until(() => s.participantCount.viewer === 20, 2000, 'count of 20 viewers');
    await leaveAll(viewers.slice(0, 15));
    await until(() => s.participantCount.viewer === 5, 2000, 'count back to 5');
    assert.deepEqual(s.participantCount, { speaker: 1, viewer: 5, total: 6 });
    assert.equal(participantEvents, 0);
    assert.equal(s.remoteParticipants.size, 0);
    await leaveAll([s, ...viewers.slice(15)]);
  });

  it('count events are coalesced: at most one per window, only on change, the settled value within a window', async () => {
    const s = await speaker('t4', 'host');
    const seen: Array<{ at: number; total: number }> = [];
    s.on('participant-count-changed', ({ total }) => seen.push({ at: Date.now(), total }));
    const viewers = await Promise.all(Array.from({ length: 100 }, () => viewer('t4')));
    const lastJoin = Date.now();
    await until(() => s.participantCount.total === 101, 2000);
    assert.ok(Date.now() - lastJoin <= WINDOW * 2 + 100, 'settles within about one window');
    await new Promise((r) => setTimeout(r, WINDOW * 3));
    assert.ok(seen.length >= 1 && seen.length <= 10, `100 joins gave ${seen.length} count events`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i]!.at - seen[i - 1]!.at >= WINDOW - 15, 'spaced by the window');
    for (let i = 1; i < seen.length; i++) assert.notEqual(seen[i]!.total, seen[i - 1]!.total, 'only on change');
    await leaveAll([s, ...viewers]);
  });

  it('getParticipants pages 250 viewers by 100 in join order', async () => {
    const host = await speaker('t5', 'host');
    const viewers: Room[] = [];
    for (let i = 0; i < 250; i++) viewers.push(await viewer('t5', `v${String(i).padStart(3, '0')}`));
    const pages: number[] = [];
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await host.getParticipants({ tier: 'viewer', limit: 100, cursor });
      pages.push(page.participants.length);
      for (const p of page.participants) {
        assert.equal(p.tier, 'viewer');
        assert.equal(typeof p.joinedAt, 'number');
        ids.push(p.id);
      }
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(pages, [100, 100, 50]);
    assert.deepEqual(ids, viewers.map((v) => v.localParticipant.id));
    const stage = await viewers[0]!.getParticipants({ tier: 'speaker' });
    assert.deepEqual(stage.participants.map((p) => [p.id, p.name, p.tier]), [['host', 'HOST', 'speaker']]);
    assert.equal(stage.nextCursor, null);
    const defaults = await host.getParticipants({ tier: 'viewer' });
    assert.equal(defaults.participants.length, 100, 'limit defaults to 100');
    await leaveAll([host, ...viewers]);
  });

  it('paging under churn: everyone present for the whole walk appears exactly once', async () => {
    const host = await speaker('t6', 'host');
    const stayers: Room[] = [];
    const leavers: Room[] = [];
    for (let i = 0; i < 120; i++) (i % 2 ? leavers : stayers).push(await viewer('t6', `w${String(i).padStart(3, '0')}`));
    const newcomers: Room[] = [];
    const seen: string[] = [];
    let cursor: string | null = null;
    let round = 0;
    do {
      const page = await host.getParticipants({ tier: 'viewer', limit: 15, cursor });
      seen.push(...page.participants.map((p) => p.id));
      cursor = page.nextCursor;
      // between pages: six leave (some already returned, some not yet), two join
      await Promise.all(leavers.splice(0, 6).map((r) => r.leave()));
      newcomers.push(await viewer('t6', `n${round++}a`), await viewer('t6', `n${round}b`));
    } while (cursor);
    for (const s of stayers) assert.equal(seen.filter((id) => id === s.localParticipant.id).length, 1, s.localParticipant.id);
    assert.equal(new Set(seen).size, seen.length, 'no one twice');
    await leaveAll([host, ...stayers, ...leavers, ...newcomers]);
  });

  it('bad paging arguments get INVALID_ARGUMENT', async () => {
    const host = await speaker('t7', 'host');
    await viewer('t7');
    for (const limit of [0, 5000, 'abc' as unknown as number, 1.5, -3]) {
      const err = await rejectsWith(host.getParticipants({ tier: 'viewer', limit }), 'INVALID_ARGUMENT');
      assert.equal(err.kind, 'Request');
    }
    await rejectsWith(host.getParticipants({ tier: 'everyone' as 'viewer' }), 'INVALID_ARGUMENT');
    await rejectsWith(host.getParticipants(undefined as never), 'INVALID_ARGUMENT');
    await rejectsWith(host.getParticipants({ tier: 'viewer', cursor: 'forged-cursor' }), 'INVALID_ARGUMENT');
    const page = await host.getParticipants({ tier: 'speaker', limit: 1 });
    assert.equal(page.nextCursor, null);
    const viewersPage = await host.getParticipants({ tier: 'viewer', limit: 1 });
    assert.equal(viewersPage.nextCursor, null, 'one viewer, one page');
    // cursors are positions: another client's cursor is just the same position in the walk
    await viewer('t7');
    const other = await speaker('t7', 'other');
    const theirs = await other.getParticipants({ tier: 'viewer', limit: 1 });
    assert.ok(theirs.nextCursor);
    assert.equal((await host.getParticipants({ tier: 'viewer', cursor: theirs.nextCursor })).participants.length, 1);
    // a cursor of one tier cannot walk the other
    await rejectsWith(other.getParticipants({ tier: 'speaker', cursor: theirs.nextCursor }), 'INVALID_ARGUMENT');
    await host.leave();
    await other.leave();
  });

  it('the spec scenario at reduced size: 10 on stage, 1,000 viewers through one shared domain-wide token', async () => {
    const observer = await t.join({ token: t.token({ roomId: 'big', participantId: 'observer', grant: { canSubscribe: true }, isViewer: true }) });
    let participantEvents = 0;
    let countEvents = 0;
    observer.on('participant-joined', () => participantEvents++);
    observer.on('participant-left', () => participantEvents++);
    observer.on('participant-count-changed', () => countEvents++);
    const shared = t.token({ grant: { canSubscribe: true, canSubscribeData: true }, isViewer: true, ttl: 600 });
    const stage = await Promise.all(Array.from({ length: 10 }, (_, i) => speaker('big', `speaker-${i}`)));
    const started = Date.now();
    const audience: Room[] = [];
    for (let batch = 0; batch < 10; batch++) {
      audience.push(...(await Promise.all(Array.from({ length: 100 }, () => t.join({ token: shared, roomId: 'big' })))));
    }
    const elapsed = Date.now() - started;
    await until(() => observer.participantCount.total === 1011, 3000, 'settled count');
    assert.deepEqual(observer.participantCount, { speaker: 10, viewer: 1001, total: 1011 });
    assert.equal(participantEvents, 10, 'exactly the 10 stage joins');
    const bound = Math.ceil(elapsed / WINDOW) + 3;
    assert.ok(countEvents <= bound, `${countEvents} count events in ${elapsed} ms (bound ${bound})`);
    assert.equal(new Set(audience.map((r) => r.localParticipant.id)).size, 1000, 'a fresh identity per joiner');
    for (const r of audience) assert.equal(r.remoteParticipants.size, 10);
    await leaveAll([...audience, ...stage, observer]);
  });
});
