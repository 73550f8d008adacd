import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CloseCode } from '../src/protocol/codes.ts';
import { effectiveGrant } from '../src/protocol/grant.ts';
import { FrameScheduler, PRE_AUTH_FLOW, type Flow } from '../relay/scheduler.ts';
import { JOIN_TIMEOUT_SPREAD } from '../relay/session.ts';
import { ROOM_GRANT, startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect, rawJoin } from './raw.ts';

describe('bad input: the relay answers with a typed error or a documented close, and keeps serving', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ joinTimeoutMs: 300, maxFrameBytes: 64 * 1024, resumeGraceMs: 150 });
  });
  after(() => t.close());
  const good = () => t.token({ roomId: 'bad', grant: ROOM_GRANT });

  it('a first frame that is not a join frame: error frame, then close 4003', async () => {
    for (const frame of ['not json', '[]', '{"type":"request","id":1,"method":"room.end"}', '{"type":"join"}', JSON.stringify({ type: 'join', v: 1, token: 't', participantId: 7 })]) {
      const c = await rawConnect(t.url);
      c.send(frame);
      const err = await c.next();
      assert.equal(err.type, 'error');
      assert.equal((err.error as { code: string }).code, 'INVALID_ARGUMENT');
      assert.equal((await c.closed).code, CloseCode.PROTOCOL_ERROR, frame);
    }
  });

  it('a binary first frame: close 4003; an oversized one: close 1009 from its header, before its bytes are read', async () => {
    const bin = await rawConnect(t.url);
    bin.send(Buffer.from([1, 2, 3]));
    assert.equal((await bin.closed).code, CloseCode.PROTOCOL_ERROR);
    const big = await rawConnect(t.url);
    big.send(JSON.stringify({ type: 'join', v: 1, token: 'x'.repeat(17 * 1024), participantId: 'p' }));
    assert.equal((await big.closed).code, 1009);
  });

  it('a join frame that never comes: close 4002 after the join timeout', async () => {
    const c = await rawConnect(t.url);
    const started = Date.now();
    assert.equal((await c.closed).code, CloseCode.JOIN_TIMEOUT);
    assert.ok(Date.now() - started >= 250);
  });

  it('an unsupported protocol version is refused with a typed error', async () => {
    const c = await rawConnect(t.url);
    c.send({ type: 'join', v: 99, token: good(), participantId: 'p' });
    const f = await c.next();
    assert.equal(f.type, 'join-error');
    assert.equal((f.error as { reason: string }).reason, 'unsupported-version');
    assert.equal((await c.closed).code, CloseCode.JOIN_REFUSED);
  });

  it('item 12: a frame over the post-join limit is answered PAYLOAD_TOO_LARGE (with its request id) and the session lives on', async () => {
    const c = await rawJoin(t.url, good());
    c.send('x'.repeat(65 * 1024));
    const plain = await c.next((f) => f.type === 'error');
    assert.equal((plain.error as { code: string }).code, 'PAYLOAD_TOO_LARGE');
    c.send(JSON.stringify({ type: 'request', id: 7, method: 'pubsub.publish', params: { topic: 't', payload: 'y'.repeat(70 * 1024) } }));
    const answer = await c.next((f) => f.id === 7);
    assert.equal((answer.error as { code: string }).code, 'PAYLOAD_TOO_LARGE');
    assert.ok((await c.request('participants.list', { tier: 'speaker' })).result, 'still a working session');
    c.ws.close();
  });

  it('a frame over four times the limit closes that socket with 1009 only', async () => {
    const c = await rawJoin(t.url, good());
    c.send('x'.repeat(4 * 64 * 1024 + 1));
    assert.equal((await c.closed).code, 1009);
  });

  it('malformed frames after the join get typed errors, with the request id when readable', async () => {
    const c = await rawJoin(t.url, good());
    const errorFrame = () => c.next((f) => f.type === 'error');
    c.send('{nope');
    assert.deepEqual(((await errorFrame()).error as { code: string }).code, 'INVALID_ARGUMENT');
    c.send(Buffer.from([0, 1, 2]));
    assert.equal(((await errorFrame()).error as { reason: string }).reason, 'bad-chunk', 'a binary frame that is not a stream chunk');
    c.send({ type: 'request', id: 41, method: 'no.such.method' });
    const unknown = await c.next((f) => f.id === 41);
    assert.equal((unknown.error as { code: string }).code, 'INVALID_ARGUMENT');
    c.send({ type: 'request', id: 42, method: 'participants.list', params: 'all' });
    assert.equal(((await c.next((f) => f.id === 42)).error as { code: string }).code, 'INVALID_ARGUMENT');
    c.send({ type: 'join', v: 1, token: good(), participantId: 'again' });
    assert.equal(((await errorFrame()).error as { reason: string }).reason, 'already-joined');
    // still a working session
    const ok = await c.request('participants.list', { tier: 'speaker' });
    assert.ok(ok.result);
    c.ws.close();
  });

  it('200 bad joins in a burst and clients vanishing mid-join leave well-behaved clients unaffected', async () => {
    const member = await t.join({ token: t.token({ roomId: 'bad-burst', participantId: 'steady', grant: ROOM_GRANT }) });
    const bad = Array.from({ length: 200 }, async (_, i) => {
      const c = await rawConnect(t.url);
      if (i % 4 === 0) c.send('garbage');
      else if (i % 4 === 1) c.send({ type: 'join', v: 1, token: 'a.b.c', participantId: `x${i}` });
      else if (i % 4 === 2) c.ws.terminate(); // vanishes before joining
      else {
        c.send({ type: 'join', v: 1, token: t.token({ roomId: 'bad-burst', grant: {} }), participantId: `y${i}` });
        c.ws.terminate(); // vanishes mid-join
      }
      return c.closed;
    });
    await Promise.all(bad);
    // a join that vanished keeps its seat for the resume grace period (150 ms here), then goes
    await until(async () => (await member.getParticipants({ tier: 'speaker' })).participants.length === 1, 3000, 'seats given up');
    const page = await member.getParticipants({ tier: 'speaker' });
    assert.deepEqual(page.participants.map((p) => p.id), ['steady'], 'no ghost members from vanished joins');
    const fresh = await t.join({ token: t.token({ roomId: 'bad-burst', grant: {} }) });
    assert.equal(fresh.connected, true);
    await until(() => t.relay.connections === 2, 2000, 'only the two live clients remain');
    await fresh.leave();
    await member.leave();
  });

  it('a connection flooding frames is read more slowly: others are not queued behind it', async () => {
    const slow = await startTestRelay({ frameRate: 200 });
    try {
      const flooder = await rawJoin(slow.url, slow.token({ roomId: 'flood', grant: {} }));
      let answered = 0;
      flooder.ws.on('message', () => answered++);
      const N = 5000;
      for (let i = 0; i < N; i++) flooder.send({ type: 'request', id: 100_000 + i, method: 'participants.list', params: { tier: 'speaker' } });
      const calm = await slow.join({ token: slow.token({ roomId: 'flood', grant: {} }) });
      await calm.getParticipants({ tier: 'speaker' });
      assert.ok(answered < N, `the calm client was answered while ${N - answered} of the flood were still unread`);
      assert.equal(flooder.ws.readyState, flooder.ws.OPEN, 'slowed, not cut off');
      await calm.leave();
      flooder.ws.terminate();
    } finally {
      await slow.close();
    }
  });

  it('a plain HTTP request gets a helpful answer, /healthz reports', async () => {
    const url = t.url.replace('ws:', 'http:');
    const res = await fetch(url);
    assert.equal(res.status, 426);
    const health = (await (await fetch(`${url}/healthz`)).json()) as { ok: boolean };
    assert.equal(health.ok, true);
    const metrics = await fetch(`${url}/metrics`);
    assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain/);
    const text = await metrics.text();
    assert.match(text, /^# TYPE tessera_connections gauge$/m);
    assert.match(text, /^tessera_joins_total [1-9]\d*$/m, 'joins counted');
    assert.match(text, /^tessera_join_refusals_total\{code="INVALID_TOKEN"\} [1-9]\d*$/m, 'refusals counted by code');
    assert.match(text, /^tessera_participants\{tier="speaker"\} \d+$/m);
  });

  it('the SDK notices a relay gone silent (heartbeat) and a live one keeps answering its pings', async () => {
    // a "relay" that accepts the join and then never says anything again
    const { WebSocketServer } = await import('ws');
    const silent = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((r) => silent.once('listening', r));
    silent.on('connection', (ws) =>
      ws.once('message', () =>
        ws.send(JSON.stringify({
          type: 'joined', v: 1, roomId: 'r',
          self: { id: 'me', name: 'me', isViewer: false, grant: effectiveGrant({ canPublishSources: [] }), joinedAt: Date.now() },
          participants: [], counts: { speaker: 1, viewer: 0, total: 1 },
          outputs: Object.fromEntries(['recording', 'hls', 'livestream', 'transcription', 'whiteboard'].map((o) => [o, { state: 'stopped' }])),
          resume: { credential: 'c', graceMs: 0 },
          limits: { maxFrameBytes: 262144, maxPayloadBytes: 65536 },
        })),
      ),
    );
    const { Sdk } = await import('../src/sdk.ts');
    const room = await Sdk.join({ url: `ws://127.0.0.1:${(silent.address() as { port: number }).port}`, token: 'x.y.z', heartbeatMs: 50, reconnect: false });
    const gone = await new Promise<string>((resolve) => room.on('disconnected', ({ reason }) => resolve(reason)));
    assert.equal(gone, 'connection-lost');
    silent.close();
    // against the real relay the pings are answered: still connected after many intervals
    const live = await Sdk.join({ url: t.url, token: good(), heartbeatMs: 30 });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(live.connected, true);
    await live.leave();
  });

  it('a dead peer is dropped by the heartbeat', async () => {
    const hb = await startTestRelay({ heartbeatMs: 100, resumeGraceMs: 100 });
    try {
      const c = await rawJoin(hb.url, hb.token({ roomId: 'hb', grant: {} }));
      assert.ok(hb.relay.context.rooms.get('default', 'hb'));
      // stop answering pings: ws answers automatically unless the socket is paused
      c.ws.pause();
      await until(() => hb.relay.connections === 0, 2000, 'the silent peer dropped');
      await until(() => hb.relay.context.rooms.get('default', 'hb') === undefined, 2000, 'its seat given up after the grace period');
      c.ws.terminate();
    } finally {
      await hb.close();
    }
  });
});

describe('join timeouts that fall due together', () => {
  it('are handed to the scheduler as work of the pre-auth flow (which spreads them over its turns while busy: relay/frame-gate.test.ts)', async () => {
    const ran: string[] = [];
    class Recording extends FrameScheduler {
      override runInTurn(flow: Flow, fn: () => void): void {
        ran.push(flow.key);
        super.runInTurn(flow, fn);
      }
    }
    const t = await startTestRelay({ joinTimeoutMs: 300, frames: new Recording() });
    try {
      const sockets = await Promise.all(Array.from({ length: 20 }, () => rawConnect(t.url)));
      const codes = await Promise.all(sockets.map(async (c) => (await c.closed).code));
      assert.deepEqual(new Set(codes), new Set([CloseCode.JOIN_TIMEOUT]));
      assert.equal(ran.filter((key) => key === PRE_AUTH_FLOW).length, 20);
    } finally {
      await t.close();
    }
  });

  it('are spread over a quarter of the timeout, at random: sockets opened together are not closed (and reconnected) together (a thousand at once held the event loop 50-90 ms each cycle)', async () => {
    const t = await startTestRelay({ joinTimeoutMs: 400 });
    try {
      const opened = performance.now();
      const sockets = await Promise.all(Array.from({ length: 40 }, () => rawConnect(t.url)));
      const closedAt = await Promise.all(sockets.map(async (c) => {
        const { code } = await c.closed;
        assert.equal(code, CloseCode.JOIN_TIMEOUT);
        return performance.now() - opened;
      }));
      const first = Math.min(...closedAt);
      const last = Math.max(...closedAt);
      assert.ok(first >= 390, `the first closed at ${first.toFixed(0)} ms: never before the join timeout`);
      assert.ok(last <= 400 * (1 + JOIN_TIMEOUT_SPREAD) + 250, `the last closed at ${last.toFixed(0)} ms`);
      // 40 uniform draws over 100 ms: a range under 40 ms has a chance below one in a billion
      assert.ok(last - first >= 40, `closed within ${(last - first).toFixed(0)} ms of each other`);
    } finally {
      await t.close();
    }
  });
});
