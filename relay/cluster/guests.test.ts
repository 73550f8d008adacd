import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { FrameScheduler } from '../scheduler.ts';
import type { RoomPort } from '../seam.ts';
import { GuestTable, MAX_GUEST_TURNS, type Guest } from './guests.ts';
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
    assert.equal(table.get('a')!.flow, table.get('b')!.flow);
    table.delete('a');
    assert.equal(scheduler.flowCount, 1);
    table.set('b', guest('t2')); // replaced: the old one's flow is left
    assert.equal(scheduler.flowCount, 1);
    table.delete('b');
    table.delete('c');
    assert.equal(scheduler.flowCount, 0);
  });

  it('work of a guest that left before its turn is not run (after still is); past MAX_GUEST_TURNS waiting, nothing is queued', async () => {
    const ran: string[] = [];
    const scheduler = new FrameScheduler({ defer: (fn) => void setImmediate(fn) });
    const table = new GuestTable(scheduler);
    const g = guest('t');
    table.set('g', g);
    // something waits: the scheduler is not open, work waits in its flow
    const other = scheduler.join('busy');
    scheduler.enqueue({ flow: other, queued: false, step: () => false });
    assert.equal(table.run('g', g, () => ran.push('first'), () => ran.push('after first')), true);
    let refused = 0;
    for (let i = 0; i < MAX_GUEST_TURNS - 1 + 10; i++) if (!table.run('g', g, () => ran.push('more'))) refused++;
    assert.equal(refused, 10, 'the rest refused at once');
    table.delete('g');
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(ran, ['after first'], 'the guest left before its turns: only after ran');
  });
});
