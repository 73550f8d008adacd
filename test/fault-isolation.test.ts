import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { createLogger } from '../relay/log.ts';
import { HANDLERS } from '../relay/handlers/index.ts';
import { rejectsWith, ROOM_GRANT, startTestRelay, type TestRelay } from './helpers.ts';

/**
 * A fault of the relay's own while it handles a frame — here, made on purpose: a logger that
 * throws on the line a refused join writes — costs that frame, never the process: the client
 * is answered INTERNAL_ERROR, the fault is counted in /metrics, and the other rooms go on.
 */
describe('fault isolation: a frame whose handling throws does not end the relay (issue 12)', () => {
  let t: TestRelay;
  const thrown: string[] = [];
  before(async () => {
    const base = createLogger('silent');
    const logger = {
      ...base,
      info(message: string, fields?: Parameters<typeof base.info>[1]) {
        if (message === 'connection refused before join') {
          thrown.push(message);
          throw new Error('the logger broke');
        }
        base.info(message, fields);
      },
      error(message: string, fields?: Parameters<typeof base.error>[1]) {
        if (message === 'request failed') {
          thrown.push(message);
          throw new Error('the logger broke');
        }
        base.error(message, fields);
      },
    };
    t = await startTestRelay({ logger });
  });
  after(() => t.close());

  it('answers INTERNAL_ERROR, counts the fault, and the rooms go on', async () => {
    const room = await t.join({ token: t.token({ roomId: 'calm', participantId: 'a', grant: ROOM_GRANT }) });
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const ws = new WebSocket(t.url);
      await new Promise((resolve) => ws.once('open', resolve));
      const frames: Array<Record<string, unknown>> = [];
      ws.on('message', (data) => frames.push(JSON.parse(String(data)) as Record<string, unknown>));
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      ws.send('{"type":"not-a-join"}');
      assert.equal(await closed, 4001, 'the join in progress is refused');
      assert.deepEqual(thrown, ['connection refused before join'], 'the fault happened');
      const error = frames.find((f) => f.type === 'error')?.error as { code: string; kind: string; reason: string };
      assert.deepEqual({ code: error.code, kind: error.kind, reason: error.reason }, { code: 'INTERNAL_ERROR', kind: 'Network', reason: 'internal' });
      const metrics = await (await fetch(t.url.replace('ws', 'http') + '/metrics')).text();
      assert.match(metrics, /^tessera_faults_total 1$/m);
      // the relay and its rooms are still there
      const sent = await room.pubsub.publish('chat', 'still here');
      assert.equal(typeof sent.id, 'string', 'the room still answers');
      const b = await t.join({ token: t.token({ roomId: 'calm', participantId: 'b', grant: ROOM_GRANT }) });
      assert.equal(b.remoteParticipants.has('a'), true);
      assert.deepEqual(uncaught, []);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });

  it('a handler that throws (and a logger that throws on it) still answers the call, INTERNAL_ERROR, and nothing is left unhandled', async () => {
    const room = await t.join({ token: t.token({ roomId: 'calm2', participantId: 'm', grant: { ...ROOM_GRANT, canModerate: true } }) });
    const table = HANDLERS as unknown as Record<string, unknown>;
    const saved = table['room.end'];
    table['room.end'] = () => {
      throw new TypeError('a bug in a handler');
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      const err = await rejectsWith(room.end(), 'INTERNAL_ERROR');
      assert.equal(err.reason, 'internal');
      assert.doesNotMatch(err.message, /a bug in a handler/, 'the fault stays in the log');
      await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(unhandled, []);
      assert.ok(thrown.includes('request failed'), 'the logger did throw');
      const metrics = await (await fetch(t.url.replace('ws', 'http') + '/metrics')).text();
      assert.match(metrics, /^tessera_faults_total 2$/m);
      assert.equal(typeof (await room.pubsub.publish('chat', 'on')).id, 'string', 'the session goes on');
    } finally {
      table['room.end'] = saved;
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
