/**
 * Issue 11, fairness: while the relay is busy, new sockets wait their turn like everyone's
 * frames. The relay runs on a scheduler whose turns the test gives by hand, so "busy" is a
 * state the test sets, not a race against the machine.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { FrameScheduler, type Turn } from '../relay/scheduler.ts';
import { parseCli } from '../relay/cli-flags.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawJoin } from './raw.ts';

describe('issue 11: upgrades take turns while the relay is busy', () => {
  let t: TestRelay;
  let manual = false;
  const deferred: Array<() => void> = [];
  const frames = new FrameScheduler({ defer: (fn) => (manual ? void deferred.push(fn) : void setImmediate(fn)) });
  /** Make the scheduler busy: a turn waits, and nothing runs until `release`. */
  const hold = () => {
    manual = true;
    const turn: Turn = { flow: frames.join('someone-busy'), queued: false, step: () => false };
    frames.enqueue(turn);
  };
  const release = () => {
    manual = false;
    for (const fn of deferred.splice(0)) fn();
  };
  before(async () => {
    t = await startTestRelay({ frames, maxPendingConnections: 2 });
  });
  after(() => t.close());

  it('an upgrade that arrives while work waits is completed in its turn, not at once', async () => {
    hold();
    const ws = new WebSocket(t.url);
    ws.on('error', () => {});
    await until(() => t.relay.upgrading === 1, 5000, 'the upgrade waits');
    assert.equal(t.relay.connections, 0, 'no session yet');
    assert.equal(ws.readyState, WebSocket.CONNECTING);
    release();
    await new Promise((resolve) => ws.once('open', resolve));
    assert.equal(t.relay.upgrading, 0);
    await until(() => t.relay.connections === 1, 5000, 'the session exists');
    ws.close();
    await until(() => t.relay.connections === 0, 5000, 'closed');
    // and the relay is idle again: the next one is taken at once
    const c = await rawJoin(t.url, t.token({ roomId: 'after', grant: {} }));
    c.ws.close();
  });

  it('upgrades waiting their turn count as connections not yet joined: past --max-pending, newcomers get 503', async () => {
    hold();
    const sockets = [new WebSocket(t.url), new WebSocket(t.url)];
    for (const ws of sockets) ws.on('error', () => {});
    await until(() => t.relay.upgrading === 2, 5000, 'two upgrades wait');
    const third = new WebSocket(t.url);
    const refused = await new Promise<string>((resolve) => {
      third.on('error', (err) => resolve(err.message));
      third.on('open', () => resolve('open'));
    });
    assert.match(refused, /503/);
    release();
    await Promise.all(sockets.map((ws) => new Promise((resolve) => ws.once('open', resolve))));
    for (const ws of sockets) ws.close();
    await until(() => t.relay.connections === 0, 5000, 'closed');
  });
});

describe('--listen-backlog', () => {
  it('is read from the command line and the environment, 511 by default', () => {
    assert.equal(parseCli([], {}).listenBacklog, 511);
    assert.equal(parseCli(['--listen-backlog', '1024'], {}).listenBacklog, 1024);
    assert.equal(parseCli([], { TESSERA_LISTEN_BACKLOG: '2048' }).listenBacklog, 2048);
    assert.throws(() => parseCli(['--listen-backlog', '0'], {}));
  });
});
