import { createHmac } from 'node:crypto';
import { WebSocketServer } from 'ws';
import { API_KEY, expect, openSdkPage, SECRET, test } from './fixtures.ts';

type Outcome =
  | { ok: true; id: string; self: string; isViewer: boolean; counts: unknown }
  | { ok: false; isSdkError: boolean; name: string; kind: string; code: string; reason?: string; message: string };

declare global {
  interface Window {
    Tessera: typeof import('../src/index.ts');
    room?: import('../src/index.ts').Room;
    /** On `pages/esm.html`: a changing canvas captured as a video track. */
    fakeVideoTrack: (width?: number, height?: number) => MediaStreamTrack;
  }
}

/** Join inside the page; the room stays on `window.room`. */
async function joinInPage(page: import('@playwright/test').Page, options: Record<string, unknown>): Promise<Outcome> {
  return page.evaluate(async (options) => {
    try {
      const room = await window.Tessera.Sdk.join(options as never);
      window.room = room;
      return { ok: true, id: room.id, self: room.localParticipant.id, isViewer: room.localParticipant.isViewer, counts: room.participantCount };
    } catch (e) {
      const err = e as InstanceType<typeof window.Tessera.SdkError>;
      return { ok: false, isSdkError: err instanceof window.Tessera.SdkError, name: err.name, kind: err.kind, code: err.code, reason: err.reason, message: err.message };
    }
  }, options);
}

function handSigned(payload: Record<string, unknown>): string {
  const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const input = `${enc({ alg: 'HS256', typ: 'JWT' })}.${enc({ iss: API_KEY, exp: Math.floor(Date.now() / 1000) + 60, ...payload })}`;
  return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
}

for (const bundle of ['iife', 'esm'] as const) {
  test(`the ${bundle} bundle loads and joins a room`, async ({ page, origin, relay, token }) => {
    await openSdkPage(page, origin, bundle);
    const outcome = await joinInPage(page, { url: relay.url, token: token({ roomId: `e2e-${bundle}`, participantId: 'browser', grant: { canSubscribe: true } }), name: 'Browser' });
    expect(outcome).toEqual({ ok: true, id: `e2e-${bundle}`, self: 'browser', isViewer: false, counts: { speaker: 1, viewer: 0, total: 1 } });
    const reason = await page.evaluate(() => new Promise((resolve) => {
      window.room!.on('disconnected', ({ reason }) => resolve(reason));
      void window.room!.leave();
    }));
    expect(reason).toBe('left');
  });
}

test.describe('every error code as the browser sees it', () => {
  test.beforeEach(async ({ page, origin }) => openSdkPage(page, origin));

  const expectError = (outcome: Outcome, kind: string, code: string, reason?: string) => {
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.isSdkError).toBe(true);
    expect(outcome.name).toBe('SdkError');
    expect([outcome.kind, outcome.code]).toEqual([kind, code]);
    if (reason) expect(outcome.reason).toBe(reason);
    expect(outcome.message.length).toBeGreaterThan(0);
  };

  test('INVALID_TOKEN', async ({ page, relay, token }) => {
    expectError(await joinInPage(page, { url: relay.url, token: 'garbage', roomId: 'x' }), 'Auth', 'INVALID_TOKEN', 'malformed');
    expectError(await joinInPage(page, { url: relay.url, token: token({ roomId: 'x', grant: {}, ttl: 1, now: Date.now() / 1000 - 600 }) }), 'Auth', 'INVALID_TOKEN', 'expired');
  });

  test('INVALID_API_KEY', async ({ page, relay, token }) => {
    expectError(await joinInPage(page, { url: relay.url, token: token({ roomId: 'x', grant: {}, apiKey: 'revoked-key', secret: 'revoked-secret-0123456789' }) }), 'Auth', 'INVALID_API_KEY', 'revoked-api-key');
  });

  test('UNAUTHORIZED_ROOM', async ({ page, relay, token }) => {
    expectError(await joinInPage(page, { url: relay.url, token: token({ roomId: 'x', grant: {} }), roomId: 'y' }), 'Auth', 'UNAUTHORIZED_ROOM');
  });

  test('UNAUTHORIZED_PARTICIPANT', async ({ page, relay, token }) => {
    expectError(await joinInPage(page, { url: relay.url, token: token({ roomId: 'x', participantId: 'ada', grant: {} }), participantId: 'eve' }), 'Auth', 'UNAUTHORIZED_PARTICIPANT');
  });

  test('INVALID_ENTRY_CLAIM', async ({ page, relay }) => {
    const token = handSigned({ roomId: 'x', joinPolicy: { mode: 'ask' }, grant: { canModerate: true } });
    expectError(await joinInPage(page, { url: relay.url, token }), 'Auth', 'INVALID_ENTRY_CLAIM');
  });

  test('INVALID_ARGUMENT (a bad url) and CONNECTION_FAILED (nothing listening)', async ({ page, token }) => {
    expectError(await joinInPage(page, { url: 'http://nope', token: token({ roomId: 'x', grant: {} }) }), 'Request', 'INVALID_ARGUMENT');
    expectError(await joinInPage(page, { url: 'ws://127.0.0.1:9', token: token({ roomId: 'x', grant: {} }) }), 'Network', 'CONNECTION_FAILED');
  });

  test('TIMEOUT: a server that never answers the join', async ({ page, token }) => {
    const silent = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((r) => silent.once('listening', r));
    const url = `ws://127.0.0.1:${(silent.address() as { port: number }).port}`;
    expectError(await joinInPage(page, { url, token: token({ roomId: 'x', grant: {} }), timeoutMs: 300 }), 'Network', 'TIMEOUT');
    silent.close();
  });

  test('ENTRY_CANCELLED: an aborted join', async ({ page, relay, token }) => {
    const outcome = await page.evaluate(async ({ url, t }) => {
      const controller = new AbortController();
      const pending = window.Tessera.Sdk.join({ url, token: t, signal: controller.signal });
      controller.abort();
      try {
        await pending;
        return null;
      } catch (e) {
        const err = e as { kind: string; code: string };
        return [err.kind, err.code];
      }
    }, { url: relay.url, t: token({ roomId: 'x', grant: {} }) });
    expect(outcome).toEqual(['Lobby', 'ENTRY_CANCELLED']);
  });

  test('NOT_FOUND, NOT_CONNECTED and ROOM_ENDED on room calls', async ({ page, relay, token }) => {
    expect((await joinInPage(page, { url: relay.url, token: token({ roomId: 'calls', participantId: 'mod', grant: { canModerate: true } }) })).ok).toBe(true);
    const codes = await page.evaluate(async () => {
      const code = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { kind: string; code: string }) => `${e.kind}/${e.code}`);
      const room = window.room!;
      const notFound = await code(room.remove('nobody'));
      await room.end();
      await new Promise((r) => room.connected ? room.on('disconnected', r) : r(null));
      const ended = await code(room.getParticipants({ tier: 'viewer' }));
      return [notFound, ended];
    });
    expect(codes).toEqual(['Request/NOT_FOUND', 'State/ROOM_ENDED']);
    expect((await joinInPage(page, { url: relay.url, token: token({ roomId: 'calls2', grant: {} }) })).ok).toBe(true);
    const afterLeave = await page.evaluate(async () => {
      await window.room!.leave();
      return window.room!.getParticipants({ tier: 'viewer' }).then(() => 'resolved', (e: { kind: string; code: string }) => `${e.kind}/${e.code}`);
    });
    expect(afterLeave).toBe('State/NOT_CONNECTED');
  });

  test('INVALID_PERMISSIONS: the action is sent to the relay and refused there', async ({ page, relay, token }) => {
    const sent: string[] = [];
    const received: string[] = [];
    page.on('websocket', (ws) => {
      ws.on('framesent', ({ payload }) => sent.push(String(payload)));
      ws.on('framereceived', ({ payload }) => received.push(String(payload)));
    });
    expect((await joinInPage(page, { url: relay.url, token: token({ roomId: 'perm', grant: { canPublish: true, canSubscribe: true } }) })).ok).toBe(true);
    const outcome = await page.evaluate(() => window.room!.end().then(() => null, (e: { kind: string; code: string; reason: string }) => [e.kind, e.code, e.reason]));
    expect(outcome).toEqual(['Auth', 'INVALID_PERMISSIONS', 'missing-canModerate']);
    const request = sent.map((s) => JSON.parse(s)).find((f) => f.type === 'request' && f.method === 'room.end');
    expect(request, 'the SDK sent room.end without checking the grant').toBeTruthy();
    const answer = received.map((s) => JSON.parse(s)).find((f) => f.type === 'response' && f.id === request.id);
    expect(answer.error.code).toBe('INVALID_PERMISSIONS');
  });
});
