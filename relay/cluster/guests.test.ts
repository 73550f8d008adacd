import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { FrameScheduler } from '../scheduler.ts';
import type { RoomPort } from '../seam.ts';
import { Budget } from '../budget.ts';
import { GuestTable, guestRequestBytes, MAX_GUEST_WAITING, MAX_GUEST_WAITING_BYTES, type Guest } from './guests.ts';
import type { RemoteLink } from './links.ts';

const port = (tokenKey: string) => ({ member: { id: 'm', tier: 'viewer', project: 'p', tokenKey } }) as unknown as RoomPort;
const guest = (tokenKey: string | null): Guest => ({ link: {} as RemoteLink, ...(tokenKey ? { port: port(tokenKey) } : {}) });

describe('guests at a room\'s home', () => {
  it('each guest with a seat runs in its token\'s flow, shared with the token\'s other guests; the flow goes with the last of them', () => {
    const scheduler = new FrameScheduler();
    const table = new GuestTable(scheduler);
    table.set('a', guest('t1'));
    table.set('b', guest('t1'));
    table.set('c', guest(null)); // a lobby joiner: no seat, no flow
    assert.equal(scheduler.flowCount, 1);
    assert.equal(table.get('a')!.turn!.flow, table.get('b')!.turn!.flow);
    table.delete('a');
    assert.equal(scheduler.flowCount, 1);
    table.set('b', guest('t2')); // replaced: the old one's flow is left
    assert.equal(scheduler.flowCount, 1);
    table.delete('b');
    table.delete('c');
    assert.equal(scheduler.flowCount, 0);
  });

  it('work of a guest that left before its turn is not run (after still is); past MAX_GUEST_WAITING of its own, requests are not queued, another guest of its token is not held back', async () => {
    const ran: string[] = [];
    const scheduler = new FrameScheduler({ defer: (fn) => void setImmediate(fn) });
    const table = new GuestTable(scheduler);
    const g = guest('t');
    const h = guest('t');
    table.set('g', g);
    table.set('h', h);
    // something waits: the scheduler is not open, work waits in its flow
    const other = scheduler.join('busy');
    scheduler.enqueue({ flow: other, queued: false, step: () => false });
    assert.equal(table.run('g', g, () => ran.push('first'), () => ran.push('after first')), true);
    let refused = 0;
    for (let i = 0; i < MAX_GUEST_WAITING - 1 + 10; i++) if (!table.run('g', g, () => ran.push('more'))) refused++;
    assert.equal(refused, 10, 'the rest refused at once');
    assert.equal(table.run('g', g, () => ran.push('chunk'), undefined, false), true, 'unbounded work (chunks, bounded by their window) still waits its turn');
    assert.equal(table.run('h', h, () => ran.push('h')), true, 'the same token\'s other guest has its own queue');
    table.delete('g');
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(ran, ['after first', 'h'], 'g left before its turns: only after ran; h ran');
  });

  it('what waits of one guest is bounded in bytes too, and counted in the relay\'s held budget until it runs (1,024 requests of 1 MiB could wait before, counted nowhere)', async () => {
    const scheduler = new FrameScheduler({ defer: (fn) => void setImmediate(fn) });
    const held = new Budget(6 * 1024 * 1024);
    const table = new GuestTable(scheduler, held);
    const g = guest('t');
    const h = guest('u');
    table.set('g', g);
    table.set('h', h);
    const busy = scheduler.join('busy');
    scheduler.enqueue({ flow: busy, queued: false, step: () => false });
    const MiB = 1024 * 1024;
    assert.equal(table.run('g', g, () => {}, undefined, true, MiB), true);
    assert.equal(table.run('g', g, () => {}, undefined, true, MiB), true);
    assert.equal(table.run('g', g, () => {}, undefined, true, 1), false, `past ${MAX_GUEST_WAITING_BYTES} bytes of its own`);
    assert.equal(held.inUse, 2 * MiB);
    assert.equal(table.run('h', h, () => {}, undefined, true, MiB), true);
    assert.equal(table.run('h', h, () => {}, undefined, true, MiB), false, 'guests\' half of the relay\'s held budget is spent');
    assert.ok(held.take(3 * MiB), 'the other half is the connections\' here');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(held.inUse, 3 * MiB, 'given back as they ran');
  });

  it('a request from the bus is measured as its payload and its request\'s JSON, and only when it must wait', async () => {
    const request = { type: 'request', id: 7, method: 'pubsub.publish', params: { topic: 't', payload: 'x'.repeat(1000) } };
    assert.equal(guestRequestBytes(request, null), JSON.stringify(request).length);
    assert.equal(guestRequestBytes(request, new Uint8Array(5000)), JSON.stringify(request).length + 5000);
    const scheduler = new FrameScheduler({ defer: (fn) => void setImmediate(fn) });
    const table = new GuestTable(scheduler, new Budget(64 * 1024 * 1024));
    const g = guest('t');
    table.set('g', g);
    let measured = 0;
    const size = () => (measured++, 1024 * 1024);
    assert.equal(table.run('g', g, () => {}, undefined, true, size), true, 'runs at once');
    assert.equal(measured, 0, 'not measured: it did not wait');
    scheduler.enqueue({ flow: scheduler.join('busy'), queued: false, step: () => false });
    assert.equal(table.run('g', g, () => {}, undefined, true, size), true);
    assert.equal(table.run('g', g, () => {}, undefined, true, size), true);
    assert.equal(table.run('g', g, () => {}, undefined, true, size), false, 'past 2 MiB of its own');
    assert.equal(measured, 3);
    await new Promise((r) => setTimeout(r, 50));
  });
});
