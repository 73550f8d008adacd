/**
 * The handler table's dispatch (issue 11, fairness): a request answered at once is answered in
 * the scheduler's step that ran it, so its time is its flow's and within the slice.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestFrame, ServerFrame } from '../src/protocol/messages.ts';
import { dispatch } from './dispatch.ts';

function scopeWith(onTarget: () => void) {
  const member = { id: 'moderator', grant: { canModerate: true } };
  const target = { id: 'speaker', link: { send: onTarget } };
  const room = { get: (id: string) => (id === member.id ? member : id === target.id ? target : undefined) };
  return { relay: {}, member, room, limiter: {}, bytes: {}, flooding: () => {} } as never;
}

const request = { type: 'request', id: 7, method: 'participant.request-unpublish', params: { participantId: 'speaker', source: 'camera' } } as RequestFrame;

describe('dispatch', () => {
  it('a handler that answers at once is answered before dispatch returns, not in a microtask after the slice', () => {
    const order: string[] = [];
    const sent: ServerFrame[] = [];
    const done = dispatch(scopeWith(() => order.push('handled')), request, { send: (f) => (sent.push(f), order.push('answered')), sendOwn: () => {}, fault: () => {} });
    order.push('returned');
    assert.deepEqual(order, ['handled', 'answered', 'returned']);
    assert.deepEqual(sent, [{ type: 'response', id: 7, result: {} }]);
    return done;
  });

  it('what a handler defers (a leave\'s close) runs after the answer and after the step that ran it, in a microtask', async () => {
    const order: string[] = [];
    const member = { id: 'm', grant: {}, link: { close: () => order.push('closed') } };
    let inRoom = true;
    const room = { get: () => (inRoom ? member : undefined), remove: () => void (inRoom = false) };
    const scope = { relay: {}, member, room, limiter: {}, bytes: {}, flooding: () => {} } as never;
    const leave = { type: 'request', id: 1, method: 'session.leave', params: {} } as RequestFrame;
    const done = dispatch(scope, leave, { send: () => order.push('answered'), sendOwn: () => {}, fault: () => {} });
    // the rest of the step: a frame already read, handled for a member who has left
    void dispatch(scope, { ...request, id: 2 }, { send: (f) => order.push(`then ${(f as { error?: { code: string } }).error?.code}`), sendOwn: () => {}, fault: () => {} });
    order.push('step ends');
    await done;
    assert.deepEqual(order, ['answered', 'then NOT_CONNECTED', 'step ends', 'closed']);
  });

  it('a refusal is answered at once too, and a fault is answered and reported', async () => {
    const sent: ServerFrame[] = [];
    const faults: string[] = [];
    const self = { ...request, params: { participantId: 'moderator', source: 'camera' } } as RequestFrame;
    const done = dispatch(scopeWith(() => {}), self, { send: (f) => void sent.push(f), sendOwn: () => {}, fault: (m) => void faults.push(m) });
    assert.equal(sent.length, 1);
    assert.equal((sent[0] as { error?: { code: string } }).error?.code, 'INVALID_ARGUMENT');
    await done;
    const broken = scopeWith(() => {
      throw new Error('a bug');
    });
    await dispatch(broken, request, { send: (f) => void sent.push(f), sendOwn: () => {}, fault: (m) => void faults.push(m) });
    assert.equal((sent[1] as { error?: { code: string } }).error?.code, 'INTERNAL_ERROR');
    assert.deepEqual(faults, ['request failed']);
  });
});
