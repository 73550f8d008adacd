import type { RequestFrame, ServerFrame } from '../src/protocol/messages.ts';
import { Serialized, type RequestScope } from './context.ts';
import { RelayError, toWireError } from './errors.ts';
import { HANDLERS, type Handler } from './handlers/index.ts';
import type { LogFields } from './log.ts';

/** Where a request's answer goes, and a fault of the relay's own is reported. */
export interface Answerer {
  send(frame: ServerFrame): void;
  /** An answer already serialised. */
  sendOwn(data: Buffer): void;
  fault(message: string, err: unknown, fields?: LogFields): void;
}

/**
 * Run one request of a member through the handler table and answer it, in the same step when
 * the handler answers at once; what the handler deferred (`scope.after`) runs in a microtask
 * after the answer is sent. A handler's `RelayError` is the
 * caller's answer; anything else is a fault of the relay, answered `INTERNAL_ERROR` and logged.
 */
export async function dispatch(base: Omit<RequestScope, 'after'>, request: RequestFrame, out: Answerer): Promise<void> {
  // frames read in the same turn as a `room.end` (before the members' sockets close) would act on
  // a room whose budgets were given back and whose outputs were stopped: nothing may run in it
  if (base.room.ended) {
    return out.send({ type: 'response', id: request.id, error: { code: 'ROOM_ENDED', kind: 'State', message: 'the room has ended', reason: 'room-ended' } });
  }
  // between `session.leave` (or a removal) and the socket's close, the member is no longer in its room
  if (base.room.get(base.member.id) !== base.member) {
    return out.send({ type: 'response', id: request.id, error: { code: 'NOT_CONNECTED', kind: 'State', message: 'this session has left the room', reason: 'left' } });
  }
  const deferred: Array<() => void> = [];
  const scope: RequestScope = { ...base, after: (fn) => deferred.push(fn) };
  let result: unknown;
  try {
    const handler = HANDLERS[request.method] as Handler<typeof request.method>;
    const answer = handler(scope, request.params);
    // a handler that answers at once is answered in the same step: an await would move the
    // answer (and what it deferred) to a microtask after the scheduler's whole slice, where its
    // time is charged to no flow and bounded by no slice
    result = answer instanceof Promise ? await answer : answer;
  } catch (err) {
    // answered first: a fault below (even the log's) must not leave the call waiting
    out.send({ type: 'response', id: request.id, error: toWireError(err) });
    if (!(err instanceof RelayError)) out.fault('request failed', err, { method: request.method });
    return;
  }
  if (result instanceof Serialized) out.sendOwn(Buffer.concat([Buffer.from(`{"type":"response","id":${request.id},"result":`), result.json, Buffer.from('}')]));
  else out.send({ type: 'response', id: request.id, result });
  if (deferred.length === 0) return;
  // what the handler deferred (a leave's close, a room's end) runs after the frames already
  // read: those are answered (NOT_CONNECTED after a leave), not dropped with the closing gate
  await Promise.resolve();
  for (const fn of deferred) fn();
}
