import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Emitter } from './emitter.ts';

interface Events {
  a: { n: number };
  joined: { id: string };
}

describe('Emitter', () => {
  it('delivers one payload object to every listener; same listener twice is one', () => {
    const e = new Emitter<Events>();
    const got: number[] = [];
    const fn = ({ n }: { n: number }) => got.push(n);
    e.on('a', fn);
    e.on('a', fn);
    e.emit('a', { n: 1 });
    assert.deepEqual(got, [1]);
    e.off('a', fn);
    e.emit('a', { n: 2 });
    assert.deepEqual(got, [1]);
  });

  it('a throwing listener neither stops the others nor breaks the emitter', () => {
    const e = new Emitter<Events>();
    const reported: unknown[] = [];
    const g = globalThis as { reportError?: (e: unknown) => void };
    const saved = g.reportError;
    g.reportError = (err) => reported.push(err);
    try {
      const got: number[] = [];
      e.on('a', () => {
        throw new Error('boom');
      });
      e.on('a', ({ n }) => got.push(n));
      e.emit('a', { n: 1 });
      e.emit('a', { n: 2 });
      assert.deepEqual(got, [1, 2]);
      assert.equal(reported.length, 2);
    } finally {
      g.reportError = saved;
    }
  });

  it('once fires once', () => {
    const e = new Emitter<Events>();
    let calls = 0;
    e.once('a', () => calls++);
    e.emit('a', { n: 1 });
    e.emit('a', { n: 1 });
    assert.equal(calls, 1);
  });

  it('replays current state to a late listener after on() returns, then live events, each once', async () => {
    const state = [{ id: 'x' }, { id: 'y' }];
    const e = new Emitter<Events>({ joined: () => state });
    const got: string[] = [];
    e.on('joined', ({ id }) => got.push(id));
    assert.deepEqual(got, [], 'not synchronously inside on()');
    // a live event before the replay ran is not delivered twice: the replay includes it
    state.push({ id: 'z' });
    e.emit('joined', { id: 'z' });
    await Promise.resolve();
    assert.deepEqual(got, ['x', 'y', 'z']);
    state.push({ id: 'w' });
    e.emit('joined', { id: 'w' });
    assert.deepEqual(got, ['x', 'y', 'z', 'w']);
  });

  it('a listener removed before its replay gets nothing', async () => {
    const e = new Emitter<Events>({ joined: () => [{ id: 'x' }] });
    const got: string[] = [];
    const off = e.on('joined', ({ id }) => got.push(id));
    off();
    await Promise.resolve();
    assert.deepEqual(got, []);
  });

  it('once() then off() removes the listener (issue 12)', () => {
    const e = new Emitter<Events>();
    let calls = 0;
    const fn = () => calls++;
    e.once('a', fn);
    e.off('a', fn);
    e.emit('a', { n: 1 });
    assert.equal(calls, 0);
    assert.equal(e.has('a'), false);
    const off = e.once('a', fn);
    off();
    e.emit('a', { n: 1 });
    assert.equal(calls, 0, 'and so does the function once() returned');
  });

  it('once() twice with one listener fires once; on() after once() does not add it again', () => {
    const e = new Emitter<Events>();
    let calls = 0;
    const fn = () => calls++;
    e.once('a', fn);
    e.once('a', fn);
    e.on('a', fn);
    e.emit('a', { n: 1 });
    e.emit('a', { n: 2 });
    assert.equal(calls, 1);
    e.on('a', fn);
    e.emit('a', { n: 3 });
    e.emit('a', { n: 4 });
    assert.equal(calls, 3, 'after it fired, it can be added again');
  });

  it('a listener removed by another during an emit is not called; one added during an emit waits for the next', () => {
    const e = new Emitter<Events>();
    const got: string[] = [];
    const second = () => got.push('second');
    const late = () => got.push('late');
    e.on('a', () => {
      got.push('first');
      e.off('a', second);
      e.on('a', late);
    });
    e.on('a', second);
    e.emit('a', { n: 1 });
    assert.deepEqual(got, ['first']);
    e.emit('a', { n: 2 });
    assert.deepEqual(got, ['first', 'first', 'late']);
  });

  it('once() on a retroactive event takes the first payload of the replay only', async () => {
    const e = new Emitter<Events>({ joined: () => [{ id: 'x' }, { id: 'y' }] });
    const got: string[] = [];
    e.once('joined', ({ id }) => got.push(id));
    await Promise.resolve();
    e.emit('joined', { id: 'z' });
    assert.deepEqual(got, ['x']);
    assert.equal(e.has('joined'), false);
  });

  it('clear() removes everything, also listeners waiting for their replay', async () => {
    const e = new Emitter<Events>({ joined: () => [{ id: 'x' }] });
    const got: string[] = [];
    e.on('joined', ({ id }) => got.push(id));
    e.on('a', ({ n }) => got.push(String(n)));
    e.clear();
    await Promise.resolve();
    e.emit('a', { n: 1 });
    e.emit('joined', { id: 'y' });
    assert.deepEqual(got, []);
  });
});
