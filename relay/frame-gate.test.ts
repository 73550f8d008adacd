/**
 * The scheduler of inbound work (issue 11, fairness): who is served when the relay has more to
 * do than it can do at once. A fake clock (each step "takes" the time it says) and a deferral
 * the test runs by hand, so nothing here depends on the machine's speed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RawData, WebSocket } from 'ws';
import { Budget } from './budget.ts';
import { FrameGate } from './frame-gate.ts';
import { SharedRate } from './data/shared-rate.ts';
import { FrameScheduler, PRE_AUTH_FLOW, type Flow, type Turn } from './scheduler.ts';

/** A scheduler on a fake clock whose deferred runs the test drives. */
function harness(options: { sliceMs?: number; fastMs?: number; creditMs?: number; quietMs?: number } = {}) {
  let clock = 0;
  const deferred: Array<() => void> = [];
  const scheduler = new FrameScheduler({ ...options, now: () => clock, defer: (fn) => void deferred.push(fn) });
  return {
    scheduler,
    /** Advance the fake clock (work "taking" time). */
    spend: (ms: number) => void (clock += ms),
    /** The fake clock. */
    clock: () => clock,
    /** Run what is deferred now (one turn of the event loop's check phase). */
    tick: () => {
      for (const fn of deferred.splice(0)) fn();
    },
    /** Run turns until nothing is deferred (at most `max`). */
    drain: (max = 10_000) => {
      for (let i = 0; i < max && deferred.length > 0; i++) for (const fn of deferred.splice(0)) fn();
    },
  };
}

/** A connection that always has another frame, each taking `costMs`; counts its steps in `log`. */
class Flooder implements Turn {
  queued = false;
  steps = 0;
  constructor(
    readonly flow: Flow,
    private readonly costMs: number,
    private readonly spend: (ms: number) => void,
    private readonly log: string[],
    private readonly name: string,
    private remaining = Infinity,
  ) {}

  step(): boolean {
    this.spend(this.costMs);
    this.steps++;
    this.log.push(this.name);
    return --this.remaining > 0;
  }
}

/**
 * Just after a flooder's frame (the shared flow is owed time), one 0.05 ms frame of a quiet
 * member arrives: how many steps later it ran, or -1 when not within that turn's slice.
 */
function memberAfterFlooder(h: ReturnType<typeof harness>, log: string[], flow: Flow): number {
  while (log[log.length - 1] !== 'flooder') h.tick();
  const at = log.length;
  h.scheduler.enqueue(new Flooder(flow, 0.05, h.spend, log, 'member', 1));
  h.tick();
  const came = log.indexOf('member', at);
  return came < 0 ? -1 : came - at;
}

describe('FrameScheduler: fairness across tokens', () => {
  it('a member that has been quiet is served next, ahead of flooders that came first and keep going', () => {
    const h = harness({ sliceMs: 4 });
    const log: string[] = [];
    // three flooders whose frames take 3 ms each: a slice of 4 ms serves two of them
    for (const name of ['a', 'b', 'c']) h.scheduler.enqueue(new Flooder(h.scheduler.join(name), 3, h.spend, log, name));
    h.tick();
    h.tick();
    h.tick();
    log.length = 0;
    const speaker = new Flooder(h.scheduler.join('speaker'), 0.1, h.spend, log, 'speaker', 1);
    h.scheduler.enqueue(speaker);
    h.tick();
    assert.equal(log[0], 'speaker', `served in order ${log.join(',')}`);
  });

  it('a flow that comes back at once gets no credit: a member that has really been quiet goes before it', () => {
    const h = harness({ sliceMs: 4, creditMs: 4, quietMs: 50 });
    const log: string[] = [];
    // a member that joined before all this and has been quiet since
    const memberFlow = h.scheduler.join('member');
    // a flow with a backlog keeps the relay busy; a flooder's socket gives one cheap frame per read
    h.scheduler.enqueue(new Flooder(h.scheduler.join('backlog'), 1, h.spend, log, 'backlog'));
    const reader = new Flooder(h.scheduler.join('reader'), 0.1, h.spend, log, 'reader', 1);
    const again = () => {
      (reader as unknown as { remaining: number }).remaining = 1;
      h.scheduler.enqueue(reader);
    };
    for (let i = 0; i < 20; i++) {
      if (!reader.queued) again();
      h.tick();
    }
    log.length = 0;
    // the reader comes back first, then a member quiet until now: the member is served first
    if (!reader.queued) again();
    h.scheduler.enqueue(new Flooder(memberFlow, 0.1, h.spend, log, 'member', 1));
    h.tick();
    assert.ok(log.indexOf('member') >= 0 && log.indexOf('member') < log.indexOf('reader'), `served in order ${log.join(',')}`);
  });

  it('a quiet member keeps its credit however the others\' virtual time stood still since its last frame, and the longer quiet goes first', () => {
    const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
    const log: string[] = [];
    // the delivery's endless backlog keeps the relay busy; nothing else moves the virtual time
    h.scheduler.enqueue(new Flooder(h.scheduler.join('delivery', 8, 0.9), 0.5, h.spend, log, 'delivery'));
    const member = h.scheduler.join('member');
    const pacer = h.scheduler.join('pacer');
    const pass = (ms: number) => {
      const until = h.clock() + ms;
      while (h.clock() < until) h.tick();
    };
    pass(1000);
    // the member's last frame was an expensive one (a page of the audience): its finish is far
    // ahead of a virtual time that then stood still
    h.scheduler.enqueue(new Flooder(member, 5, h.spend, log, 'member-page', 1));
    pass(440);
    // a token pacing its frames just over the quiet time apart
    for (let i = 0; i < 8; i++) {
      h.scheduler.enqueue(new Flooder(pacer, 0.1, h.spend, log, 'pacer', 1));
      pass(55);
    }
    assert.ok(log.includes('member-page') && log.filter((n) => n === 'pacer').length === 8);
    log.length = 0;
    // the pacer's next frame comes first, then the member's chat line, quiet for 880 ms
    h.scheduler.enqueue(new Flooder(pacer, 0.1, h.spend, log, 'pacer', 1));
    h.scheduler.enqueue(new Flooder(member, 0.1, h.spend, log, 'member', 1));
    pass(20);
    const order = log.filter((n) => n !== 'delivery');
    assert.deepEqual(order, ['member', 'pacer'], `served in order ${order.join(',')}`);
    assert.ok(log.indexOf('member') <= 1, `the member's line waited for ${log.indexOf('member')} steps of the delivery`);
  });

  it('a token whose connections send the moment they join gets no credit: at a flood\'s start, members who were there and quiet go first', () => {
    const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
    const log: string[] = [];
    // the room's speakers joined a while ago and have been quiet since
    const speakers = Array.from({ length: 3 }, (_, i) => h.scheduler.join(`speaker-${i}`));
    h.spend(1_000);
    // every flood starts at once: thirty new tokens, each with a burst of 2 ms frames
    for (let i = 0; i < 30; i++) h.scheduler.enqueue(new Flooder(h.scheduler.join(`flood-${i}`), 2, h.spend, log, 'flood', 20));
    h.tick();
    // ...and the speakers' chat lines arrive just after them
    const at = log.length;
    speakers.forEach((flow, i) => h.scheduler.enqueue(new Flooder(flow, 0.1, h.spend, log, `speaker-${i}`, 1)));
    h.tick();
    h.tick();
    const served = log.slice(at);
    const last = Math.max(...speakers.map((_, i) => served.indexOf(`speaker-${i}`)));
    assert.ok(served.indexOf('speaker-0') >= 0 && last <= 3, `the speakers came at ${speakers.map((_, i) => served.indexOf(`speaker-${i}`)).join(', ')} after they arrived, behind ${served.slice(0, last).join(',')}`);
  });

  it('flooders that never stop all get turns: none waits behind the others for ever', () => {
    const h = harness({ sliceMs: 4 });
    const log: string[] = [];
    const flooders = ['a', 'b', 'c', 'd', 'e'].map((name) => new Flooder(h.scheduler.join(name), 3, h.spend, log, name));
    for (const f of flooders) h.scheduler.enqueue(f);
    for (let i = 0; i < 50; i++) h.tick();
    const steps = flooders.map((f) => f.steps);
    assert.ok(Math.min(...steps) >= Math.max(...steps) - 1, `steps per flooder: ${steps.join(', ')}`);
  });

  it('the connections of one token share one share: ten sockets of one token get what one member gets', () => {
    const h = harness({ sliceMs: 4 });
    const log: string[] = [];
    const shared = h.scheduler.join('leaked-token');
    const many = Array.from({ length: 10 }, (_, i) => new Flooder(shared, 1, h.spend, log, `leaked-${i}`));
    const one = new Flooder(h.scheduler.join('member'), 1, h.spend, log, 'member');
    for (const f of many) h.scheduler.enqueue(f);
    h.scheduler.enqueue(one);
    for (let i = 0; i < 200; i++) h.tick();
    const leaked = many.reduce((n, f) => n + f.steps, 0);
    assert.ok(Math.abs(leaked - one.steps) <= 2, `the token's ten connections: ${leaked} frames; the member: ${one.steps}`);
    // and among themselves, the token's connections take turns
    const each = many.map((f) => f.steps);
    assert.ok(Math.max(...each) - Math.min(...each) <= 1, `per connection: ${each.join(', ')}`);
  });

  it('what is counted is the time frames take, not their number', () => {
    const h = harness({ sliceMs: 4 });
    const log: string[] = [];
    const heavy = new Flooder(h.scheduler.join('heavy'), 5, h.spend, log, 'heavy');
    const light = new Flooder(h.scheduler.join('light'), 0.5, h.spend, log, 'light');
    h.scheduler.enqueue(heavy);
    h.scheduler.enqueue(light);
    for (let i = 0; i < 500; i++) h.tick();
    const heavyMs = heavy.steps * 5;
    const lightMs = light.steps * 0.5;
    assert.ok(light.steps >= 9 * heavy.steps, `light ${light.steps} frames, heavy ${heavy.steps}`);
    assert.ok(Math.abs(heavyMs - lightMs) <= 10, `heavy used ${heavyMs} ms, light ${lightMs} ms`);
  });

  it('a flow of weight 4 gets four times the time of a flow of weight 1 while both have work', () => {
    const h = harness({ sliceMs: 4 });
    const log: string[] = [];
    const heavy = new Flooder(h.scheduler.join('weighted', 4), 1, h.spend, log, 'weighted');
    const plain = new Flooder(h.scheduler.join('plain'), 1, h.spend, log, 'plain');
    h.scheduler.enqueue(heavy);
    h.scheduler.enqueue(plain);
    for (let i = 0; i < 500; i++) h.tick();
    const ratio = heavy.steps / plain.steps;
    assert.ok(ratio > 3.8 && ratio < 4.2, `weighted ${heavy.steps} frames, plain ${plain.steps}`);
  });

  it('a flow with a share gets it however many flows wait: with thirty flooders, a weight alone would leave it a fifth', () => {
    for (const flooders of [1, 4, 30]) {
      const h = harness({ sliceMs: 4 });
      const log: string[] = [];
      const shared = new Flooder(h.scheduler.join('delivery', 8, 0.7), 0.05, h.spend, log, 'shared');
      const others = Array.from({ length: flooders }, (_, i) => new Flooder(h.scheduler.join(`flooder-${i}`), 0.05, h.spend, log, 'flooder'));
      h.scheduler.enqueue(shared);
      for (const f of others) h.scheduler.enqueue(f);
      for (let i = 0; i < 500; i++) h.tick();
      const share = shared.steps / log.length;
      // one flooder: its weight of 8 gives it more than the share (8/9); more flooders: the share holds
      const expected = flooders === 1 ? 8 / 9 : 0.7;
      assert.ok(Math.abs(share - expected) < 0.03, `${flooders} flooders: the shared flow got ${(share * 100).toFixed(1)} % of the time`);
      // the rest is shared fairly among the others
      const counts = others.map((f) => f.steps);
      assert.ok(Math.max(...counts) - Math.min(...counts) <= 1, `the others got ${counts.join(', ')} frames`);
    }
    // and without the share, thirty flooders leave a weight of 8 about 8/38 of the time
    const h = harness({ sliceMs: 4 });
    const log: string[] = [];
    const weighted = new Flooder(h.scheduler.join('weighted', 8), 0.05, h.spend, log, 'weighted');
    h.scheduler.enqueue(weighted);
    for (let i = 0; i < 30; i++) h.scheduler.enqueue(new Flooder(h.scheduler.join(`f-${i}`), 0.05, h.spend, log, 'flooder'));
    for (let i = 0; i < 500; i++) h.tick();
    assert.ok(weighted.steps / log.length < 0.25, `weight alone: ${((weighted.steps / log.length) * 100).toFixed(1)} %`);
  });

  it('beside the shared flow\'s endless backlog, the flooders finish and a quiet member then comes next', () => {
    const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
    const log: string[] = [];
    const shared = new Flooder(h.scheduler.join('delivery', 1, 0.7), 0.05, h.spend, log, 'shared');
    const flooders = Array.from({ length: 10 }, (_, i) => new Flooder(h.scheduler.join(`flooder-${i}`), 0.05, h.spend, log, 'flooder', 200));
    h.scheduler.enqueue(shared);
    for (const f of flooders) h.scheduler.enqueue(f);
    h.drain(2000);
    assert.ok(flooders.every((f) => f.steps === 200), 'the flooders finished: they were not starved');
    // a quiet member's frame goes within a slice, ahead of the shared flow's endless backlog
    h.spend(100);
    const member = new Flooder(h.scheduler.join('member'), 0.05, h.spend, log, 'member', 1);
    const at = log.length;
    h.scheduler.enqueue(member);
    h.tick();
    assert.ok(log.indexOf('member', at) >= 0 && log.indexOf('member', at) - at < 100, `the member came ${log.indexOf('member', at) - at} steps after it arrived`);
  });

  it('a quiet member\'s frame goes before the shared flow\'s backlog too, whatever the balance', () => {
    const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
    const log: string[] = [];
    const shared = new Flooder(h.scheduler.join('delivery', 1, 0.85), 0.05, h.spend, log, 'shared');
    const flooders = Array.from({ length: 10 }, (_, i) => new Flooder(h.scheduler.join(`flooder-${i}`), 1, h.spend, log, 'flooder'));
    // members who joined before the flood and have been quiet since
    const members = Array.from({ length: 20 }, (_, k) => h.scheduler.join(`member-${k}`));
    h.scheduler.enqueue(shared);
    for (const f of flooders) h.scheduler.enqueue(f);
    for (let i = 0; i < 50; i++) h.tick();
    for (let k = 0; k < 20; k++) {
      const came = memberAfterFlooder(h, log, members[k]!);
      assert.ok(came >= 0 && came <= 1, `member ${k} came ${came} steps after it arrived`);
    }
  });

  it('while the shared flow is owed its whole bound, a quiet member\'s frame still goes next, not after two slices of it', () => {
    const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
    const log: string[] = [];
    const shared = new Flooder(h.scheduler.join('delivery', 1, 0.9), 0.05, h.spend, log, 'shared');
    // 2 ms frames: each one puts the shared flow at its bound (owed 8 ms of its own work)
    const flooder = new Flooder(h.scheduler.join('flooder'), 2, h.spend, log, 'flooder');
    const members = Array.from({ length: 10 }, (_, k) => h.scheduler.join(`member-${k}`));
    h.scheduler.enqueue(shared);
    h.scheduler.enqueue(flooder);
    for (let i = 0; i < 50; i++) h.tick();
    h.spend(100); // the members have been quiet
    for (let k = 0; k < 10; k++) {
      const came = memberAfterFlooder(h, log, members[k]!);
      // each member before it was paid back at the shared flow's rate: 9 × 0.05 ms, ten steps of 0.05
      assert.ok(came >= 0 && came <= 10, `member ${k} ${came < 0 ? 'did not come within the slice' : `came ${came} steps after it arrived`} (two slices of the shared flow are 160 steps)`);
    }
  });

  it('after the shared flow ran alone, a quiet frame that goes ahead of it owes a finite debt: later quiet members are not held behind it', () => {
    for (const cost of [0.05, 0]) {
      const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
      const log: string[] = [];
      const shared = new Flooder(h.scheduler.join('delivery', 8, 0.9), 0.05, h.spend, log, 'shared');
      const members = Array.from({ length: 5 }, (_, k) => h.scheduler.join(`member-${k}`));
      // a token that was quiet too, and then floods: its first frame goes ahead on its credit
      const flooder = h.scheduler.join('flooder');
      h.scheduler.enqueue(shared);
      for (let i = 0; i < 30; i++) h.tick(); // the delivery alone: no flow of the heap counts against its weight
      h.scheduler.enqueue(new Flooder(members[0]!, cost, h.spend, log, 'member', 1));
      h.tick();
      h.scheduler.enqueue(new Flooder(flooder, 0.85, h.spend, log, 'flooder'));
      for (let k = 1; k < 5; k++) {
        for (let i = 0; i < 15; i++) h.tick();
        const at = log.length;
        h.scheduler.enqueue(new Flooder(members[k]!, 0.05, h.spend, log, 'member', 1));
        h.tick();
        const came = log.indexOf('member', at);
        // (a debt divided by a part of 1 was infinite, or NaN for a frame whose time was all excused: 8 ms each)
        assert.ok(came >= 0 && came - at <= 20, `first frame ${cost} ms: member ${k} ${came < 0 ? 'did not come within the slice' : `came ${came - at} steps after it arrived`}`);
      }
    }
  });

  it('what a quiet frame that went ahead owes is forgiven once the shared flow has caught up: a member\'s line 16-60 ms after an expensive one goes at once', () => {
    for (let delay = 16; delay <= 60; delay += 4) {
      let clock = 0;
      const deferred: Array<() => void> = [];
      const scheduler = new FrameScheduler({ sliceMs: 4, creditMs: 1, quietMs: 50, now: () => clock, defer: (fn) => void deferred.push(fn) });
      const tick = () => {
        for (const fn of deferred.splice(0)) fn();
      };
      let memberAt = -1;
      const turn = (flow: Flow, cost: number, n = Infinity, onStep?: () => void): Turn => ({
        flow,
        queued: false,
        step() {
          onStep?.();
          clock += cost;
          return --n > 0;
        },
      });
      const attacker = scheduler.join('attacker');
      const member = scheduler.join('member');
      scheduler.enqueue(turn(scheduler.join('delivery', 8, 0.9), 0.05));
      scheduler.enqueue(turn(scheduler.join('flooder'), 0.85));
      while (clock < 200) tick();
      // one 5 ms frame of a token back from being quiet goes ahead of the delivery (45 ms of it owed at 90 %)
      scheduler.enqueue(turn(attacker, 5, 1));
      const sent = clock;
      while (clock < sent + delay) tick();
      const arrived = clock;
      scheduler.enqueue(turn(member, 0.05, 1, () => void (memberAt = clock)));
      while (memberAt < 0) tick();
      // before it was forgiven the member waited up to two slices of the delivery (6 ms)
      assert.ok(memberAt - arrived <= 1, `${delay} ms after the expensive frame, the member waited ${(memberAt - arrived).toFixed(2)} ms`);
    }
  });

  it('quiet frames that go ahead of an owed shared flow are paid back: a crowd of credited tokens still leaves it its share', () => {
    const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
    const log: string[] = [];
    let sharedMs = 0;
    let tokenMs = 0;
    const shared: Turn = {
      flow: h.scheduler.join('delivery', 1, 0.9),
      queued: false,
      step() {
        h.spend(0.05);
        sharedMs += 0.05;
        return true;
      },
    };
    h.scheduler.enqueue(shared);
    h.scheduler.enqueue(new Flooder(h.scheduler.join('flooder'), 2, h.spend, log, 'flooder'));
    for (let i = 0; i < 50; i++) h.tick();
    // two hundred tokens, quiet so far, send a 0.5 ms frame each at once
    const tokens = Array.from({ length: 200 }, (_, i) => h.scheduler.join(`token-${i}`));
    h.spend(60);
    sharedMs = 0;
    let pending = tokens.length;
    for (const flow of tokens) {
      h.scheduler.enqueue({
        flow,
        queued: false,
        step() {
          h.spend(0.5);
          tokenMs += 0.5;
          pending--;
          return false;
        },
      });
    }
    for (let i = 0; i < 2000 && pending > 50; i++) h.tick();
    const part = sharedMs / (sharedMs + tokenMs);
    assert.ok(part >= 0.85, `the shared flow had ${(part * 100).toFixed(0)} % of the time while the crowd's frames went first (its share: 90 %)`);
  });

  it('a crowd of credited tokens cannot hold the shared flow off for more than a few slices, nor the shared flow them', () => {
    for (const weight of [1, 8]) {
      const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
      let clock = 0;
      let lastShared = 0;
      let lastToken = 0;
      let worst = 0;
      let tokensWorst = 0;
      let pending = 0;
      const turn = (flow: Flow, cost: number, n = Infinity, kind: 'shared' | 'token' | 'flooder' = 'flooder'): Turn => ({
        flow,
        queued: false,
        step() {
          if (kind === 'shared') worst = Math.max(worst, clock - lastShared);
          if (kind === 'token') tokensWorst = Math.max(tokensWorst, clock - lastToken);
          h.spend(cost);
          clock += cost;
          if (kind === 'shared') lastShared = clock;
          if (kind === 'token') {
            lastToken = clock;
            pending--;
          }
          return --n > 0;
        },
      });
      h.scheduler.enqueue(turn(h.scheduler.join('delivery', weight, 0.7), 0.05, Infinity, 'shared'));
      h.scheduler.enqueue(turn(h.scheduler.join('flooder'), 0.05));
      for (let i = 0; i < 100; i++) h.tick();
      // a hundred tokens, each quiet for 50 ms (or held back that long by its own byte budget), send a 2 ms frame each
      const tokens = Array.from({ length: 100 }, (_, i) => h.scheduler.join(`token-${i}`));
      h.spend(60);
      clock += 60;
      lastShared = lastToken = clock;
      worst = tokensWorst = 0;
      pending = tokens.length;
      for (const f of tokens) h.scheduler.enqueue(turn(f, 2, 1, 'token'));
      for (let i = 0; i < 400 && pending > 0; i++) h.tick();
      assert.equal(pending, 0, `weight ${weight}: every token was served`);
      assert.ok(worst <= 20, `weight ${weight}: the delivery waited ${worst.toFixed(1)} ms`);
      assert.ok(tokensWorst <= 20, `weight ${weight}: the tokens waited ${tokensWorst.toFixed(1)} ms`);
    }
  });

  it('a shared flow left during its own step still runs what that step brings back', () => {
    const h = harness({ sliceMs: 4 });
    const flow = h.scheduler.join('delivery', 1, 0.7);
    let steps = 0;
    const turn: Turn = {
      flow,
      queued: false,
      step() {
        h.spend(0.05);
        if (++steps === 1) h.scheduler.leave(flow);
        return steps < 5;
      },
    };
    h.scheduler.enqueue(turn);
    h.drain();
    assert.equal(steps, 5);
    assert.equal(h.scheduler.busy, false);
  });

  it('a shared flow left while it has work still runs that work', () => {
    const h = harness({ sliceMs: 4 });
    const log: string[] = [];
    const flow = h.scheduler.join('delivery', 1, 0.7);
    const last = new Flooder(flow, 0.05, h.spend, log, 'shared', 3);
    h.scheduler.enqueue(last);
    h.scheduler.leave(flow);
    h.drain();
    assert.equal(last.steps, 3);
    assert.equal(h.scheduler.busy, false);
    // and a new one may take its place
    assert.doesNotThrow(() => h.scheduler.join('delivery-2', 1, 0.7));
  });

  it('time a step excuses (written to an audience at once) is not charged to its flow', () => {
    const h = harness({ sliceMs: 4 });
    const log: string[] = [];
    const flooder = new Flooder(h.scheduler.join('flooder'), 1, h.spend, log, 'flooder');
    const sender: Turn = {
      flow: h.scheduler.join('sender'),
      queued: false,
      step: () => {
        h.spend(1);
        h.spend(9);
        h.scheduler.excuse(9);
        log.push('sender');
        return true;
      },
    };
    h.scheduler.enqueue(flooder);
    h.scheduler.enqueue(sender);
    for (let i = 0; i < 500; i++) h.tick();
    const senderSteps = log.filter((n) => n === 'sender').length;
    assert.ok(Math.abs(senderSteps - flooder.steps) <= 1, `sender ${senderSteps} frames, flooder ${flooder.steps}`);
  });

  it('work arriving while nothing waits runs at once, but only up to the fast budget per turn of the event loop', () => {
    const h = harness({ fastMs: 2 });
    const flow = h.scheduler.join('member');
    assert.equal(h.scheduler.open, true);
    h.scheduler.runNow(flow, () => h.spend(1.5));
    assert.equal(h.scheduler.open, true, '1.5 ms of 2 used');
    h.scheduler.runNow(flow, () => h.spend(1.5));
    assert.equal(h.scheduler.open, false, 'the rest of this turn waits its turn');
    h.tick();
    assert.equal(h.scheduler.open, true, 'a new turn of the event loop, a new budget');
    const waiting = new Flooder(flow, 1, h.spend, [], 'w', 1);
    h.scheduler.enqueue(waiting);
    assert.equal(h.scheduler.open, false, 'while anything waits, nothing jumps the queue');
    h.drain();
    assert.equal(waiting.steps, 1);
    assert.equal(h.scheduler.open, true);
  });

  it('a flow in debt waits for the others; once the relay has caught up, the debt is forgiven', () => {
    const h = harness({ sliceMs: 100, creditMs: 0 });
    const log: string[] = [];
    const big = h.scheduler.join('big');
    const small = h.scheduler.join('small');
    // busy: a 20 ms frame of `big`, then both have frames waiting: `small`'s go first until it has used as much
    h.scheduler.enqueue(new Flooder(h.scheduler.join('keeps-busy'), 1, h.spend, log, 'busy', 1));
    h.scheduler.enqueue(new Flooder(big, 20, h.spend, log, 'big', 2));
    h.scheduler.enqueue(new Flooder(small, 5, h.spend, log, 'small', 5));
    h.tick();
    assert.deepEqual(log, ['busy', 'big', 'small', 'small', 'small', 'small', 'big', 'small']);
    // nothing waits now: the next busy period starts from zero for everyone
    log.length = 0;
    h.scheduler.enqueue(new Flooder(big, 1, h.spend, log, 'big', 1));
    h.scheduler.enqueue(new Flooder(small, 1, h.spend, log, 'small', 1));
    h.tick();
    assert.deepEqual(log, ['big', 'small'], 'in arrival order');
  });

  it('flows nobody uses are forgotten', () => {
    const h = harness();
    const a = h.scheduler.join('a');
    const b = h.scheduler.join('a');
    assert.equal(a, b);
    assert.equal(h.scheduler.flowCount, 1);
    h.scheduler.leave(a);
    assert.equal(h.scheduler.flowCount, 1);
    h.scheduler.leave(b);
    assert.equal(h.scheduler.flowCount, 0);
  });

  it('work a timer starts (a thousand join timeouts due together) runs at once only while the scheduler is open, else in its flow\'s turns', () => {
    const h = harness({ sliceMs: 4, fastMs: 2, creditMs: 0 });
    const log: string[] = [];
    const preAuth = h.scheduler.join(PRE_AUTH_FLOW);
    h.scheduler.runInTurn(preAuth, () => log.push('at once'));
    assert.equal(log.join(), 'at once', 'an idle relay runs it on the spot');
    // a member's flood keeps the scheduler busy; a thousand timeouts of 0.1 ms each fall due
    const member = h.scheduler.join('member');
    h.scheduler.enqueue(new Flooder(member, 0.5, h.spend, log, 'member'));
    log.length = 0;
    for (let i = 0; i < 1000; i++) h.scheduler.runInTurn(preAuth, () => (h.spend(0.1), log.push('timeout')));
    assert.equal(log.length, 0, 'none runs in the timer itself');
    h.tick();
    const timeouts = log.filter((n) => n === 'timeout').length;
    assert.ok(timeouts > 0 && timeouts < 1000, `a slice runs some of them (${timeouts}), not all in one go`);
    assert.ok(log.includes('member'), 'the member is served within the same slice');
    for (let i = 0; i < 200; i++) h.tick();
    assert.equal(log.filter((n) => n === 'timeout').length, 1000, 'and in the end every one runs');
  });
});

/** Just what the gate uses of a ws socket. */
function fakeSocket() {
  const s = { paused: false, pause: () => void (s.paused = true), resume: () => void (s.paused = false) };
  return s;
}

describe('FrameGate in the scheduler', () => {
  const budget = { frameRate: 1e6, binaryFrameRate: 1e6, textByteRate: 1e9, textByteBurst: 1e9 };
  const frame = (text: string) => Buffer.from(text) as RawData;

  it('a connection starts in the pre-auth flow and moves to its token\'s flow when it joins', () => {
    const h = harness();
    const gate = new FrameGate(fakeSocket() as unknown as WebSocket, budget, () => {}, () => {}, new Budget(1e9), h.scheduler);
    assert.equal(gate.flow.key, PRE_AUTH_FLOW);
    gate.moveTo('project\ntoken');
    assert.equal(gate.flow.key, 'project\ntoken');
    const other = new FrameGate(fakeSocket() as unknown as WebSocket, budget, () => {}, () => {}, new Budget(1e9), h.scheduler);
    other.moveTo('project\ntoken');
    assert.equal(other.flow, gate.flow, 'two connections of one token share a flow');
    gate.close();
    other.close();
    assert.equal(h.scheduler.flowCount, 0, 'nobody uses either flow any more');
  });

  it('frames past the fast budget wait, with their socket paused, and are handled in their flow\'s turn, in order', () => {
    const h = harness({ fastMs: 2 });
    const handled: string[] = [];
    const ws = fakeSocket();
    const gate = new FrameGate(ws as unknown as WebSocket, budget, (data) => {
      handled.push(String(data));
      h.spend(1);
    }, () => {}, new Budget(1e9), h.scheduler);
    for (const text of ['1', '2', '3', '4']) gate.push(frame(text), false);
    assert.deepEqual(handled, ['1', '2'], 'two frames of 1 ms at once; the rest waits');
    assert.equal(ws.paused, true, 'its socket is not read meanwhile');
    assert.equal(gate.holding, 2);
    h.drain();
    assert.deepEqual(handled, ['1', '2', '3', '4']);
    assert.equal(ws.paused, false);
    gate.close();
  });

  it('a flooder held to its own budget comes back without credit: a member who really was quiet goes first', async () => {
    const h = harness({ fastMs: 0, creditMs: 1, quietMs: 50 });
    const handled: string[] = [];
    const handle = (data: RawData) => {
      handled.push(String(data));
      h.spend(0.01);
    };
    // 10 frames a second, bursts of 20: the 21st waits 100 ms for its token (a loaded machine
    // pausing the test for less than that does not let it through early)
    const tight = { ...budget, frameRate: 10 };
    const flooder = new FrameGate(fakeSocket() as unknown as WebSocket, tight, handle, () => {}, new Budget(1e9), h.scheduler);
    flooder.moveTo('project\nflooder');
    const member = new FrameGate(fakeSocket() as unknown as WebSocket, budget, handle, () => {}, new Budget(1e9), h.scheduler);
    member.moveTo('project\nmember');
    h.spend(1000); // both quiet since they joined
    for (let i = 0; i < 21; i++) flooder.push(frame('flood'), false);
    h.drain();
    assert.equal(handled.length, 20, 'the burst is handled; the last frame waits for its budget');
    // long enough on the scheduler's clock to count as quiet, had it been
    h.spend(100);
    await new Promise((resolve) => setTimeout(resolve, 150));
    // the flooder's budget had its token first: it is back in line before the member's frame arrives
    member.push(frame('member'), false);
    h.drain();
    assert.deepEqual(handled.slice(20), ['member', 'flood']);
    flooder.close();
    member.close();
  });

  it('a quiet member whose one frame waited its turn of a rate shared with other tokens keeps its credit: it goes next, not after the delivery\'s owed slices', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const h = harness({ sliceMs: 4, creditMs: 1, quietMs: 50 });
    const log: string[] = [];
    // the delivery's endless backlog, and a flooding token whose 2 ms frames keep the delivery owed its bound
    h.scheduler.enqueue(new Flooder(h.scheduler.join('delivery', 8, 0.9), 0.05, h.spend, log, 'delivery'));
    h.scheduler.enqueue(new Flooder(h.scheduler.join('project\nflooder'), 2, h.spend, log, 'flooder'));
    let rateClock = 0;
    const rate = new SharedRate(1000, 1000, () => rateClock);
    assert.equal(rate.take(1000), true, 'other domain-wide tokens of the project have just used the shared rate up');
    const member = new FrameGate(fakeSocket() as unknown as WebSocket, budget, (data) => {
      log.push(`member:${String(data).length}`);
      h.spend(0.05);
    }, () => {}, new Budget(1e9), h.scheduler);
    member.moveTo('project\nmember');
    member.shareText(rate);
    for (let i = 0; i < 50; i++) h.tick();
    h.spend(1000); // the member has been quiet for a second
    // its one chat line (100 bytes: 100 ms of the shared rate) arrives while the relay is busy, and waits in the rate's line
    member.push(frame('x'.repeat(100)), false);
    const t0 = h.clock();
    while (h.clock() - t0 < 100 || log.at(-1) !== 'flooder') h.tick();
    assert.ok(!log.some((n) => n.startsWith('member')), 'it waited for its turn of the rate');
    const at = log.length;
    rateClock += 100;
    t.mock.timers.tick(100); // its turn: granted, back in the scheduler
    h.tick();
    const came = log.findIndex((n, i) => i >= at && n.startsWith('member'));
    assert.ok(came >= 0 && came - at <= 2, `the member came ${came < 0 ? 'not within the slice' : `${came - at} steps after its grant`} (two slices of the delivery are 160 steps)`);
    member.close();
  });

  it('a connection closed while its frames wait is read again, so its closing handshake and its end are seen', () => {
    const h = harness({ fastMs: 0 });
    const ws = fakeSocket();
    const handled: string[] = [];
    const gate = new FrameGate(ws as unknown as WebSocket, budget, (data) => void handled.push(String(data)), () => {}, new Budget(1e9), h.scheduler);
    gate.push(frame('1'), false);
    assert.equal(ws.paused, true);
    gate.close();
    assert.equal(ws.paused, false);
    h.drain();
    assert.deepEqual(handled, [], 'what waited is dropped');
  });

  it('connections sharing a rate (a domain-wide token\'s crowd) are read in turn: each holds one frame, unread beyond it, until its turn; one that closes in line is passed over', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const h = harness();
    let clock = 0;
    const shared = new SharedRate(1000, 1000, () => clock);
    assert.equal(shared.take(1000), true);
    const handled: string[] = [];
    const sockets = new Map<string, ReturnType<typeof fakeSocket>>();
    const gates = new Map<string, FrameGate>();
    for (const name of ['a', 'b', 'c']) {
      const ws = fakeSocket();
      const gate = new FrameGate(ws as unknown as WebSocket, budget, (data) => void handled.push(String(data)), () => {}, new Budget(1e9), h.scheduler);
      gate.shareText(shared);
      sockets.set(name, ws);
      gates.set(name, gate);
      gate.push(frame(name.repeat(100)), false);
      assert.equal(ws.paused, true, `${name} is not read beyond its frame while it waits`);
    }
    const advance = (ms: number) => {
      clock += ms;
      t.mock.timers.tick(ms);
      h.drain();
    };
    advance(100);
    assert.deepEqual(handled.map((f) => f[0]), ['a']);
    assert.equal(sockets.get('a')!.paused, false, 'a is read again once its frame passed');
    gates.get('b')!.close();
    advance(100);
    assert.deepEqual(handled.map((f) => f[0]), ['a', 'c'], 'b left the line: c is next');
    assert.equal(shared.waiting, 0);
    for (const gate of gates.values()) gate.close();
  });
});
