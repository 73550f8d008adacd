import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket as NodeWebSocket } from 'ws';
import { startRelay, type Relay, type RelayOptions } from '../relay/server.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken, type MintOptions } from '../src/server/mint.ts';
import { Sdk, type JoinOptions } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import type { RoomEvents } from '../src/room-events.ts';

// Node 20 has no global WebSocket: the SDK runs unchanged on the ws package's.
(globalThis as { WebSocket?: unknown }).WebSocket ??= NodeWebSocket;

export const API_KEY = 'test-key';
export const SECRET = 'test-secret-0123456789abcdef';

export interface TestRelay {
  relay: Relay;
  url: string;
  keys: KeyStore;
  /** Mint a token signed with the test key; `apiKey`/`secret` may be overridden. */
  token(claims: Omit<MintOptions, 'apiKey' | 'secret'> & Partial<Pick<MintOptions, 'apiKey' | 'secret'>>): string;
  /** Join with the SDK; the room is left when the relay closes. */
  join(options: Partial<JoinOptions> & { token: string }): Promise<Room>;
  close(): Promise<void>;
}

/**
 * A real relay on a free loopback port, silent, with one test key; its outputs go to a temporary
 * directory of its own, removed when it closes.
 */
export async function startTestRelay(options: Partial<RelayOptions> = {}): Promise<TestRelay> {
  const keys = options.keys ?? new KeyStore({ [API_KEY]: SECRET });
  const dir = mkdtempSync(join(tmpdir(), 'tessera-test-'));
  let relay: Relay;
  try {
    relay = await startRelay({ port: 0, logLevel: 'silent', recordingsDir: join(dir, 'recordings'), hlsDir: join(dir, 'hls'), ...options, keys });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const rooms: Room[] = [];
  return {
    relay,
    url: relay.url,
    keys,
    token: (claims) => mintToken({ apiKey: API_KEY, secret: SECRET, ...claims }),
    async join(options) {
      const room = await Sdk.join({ url: relay.url, ...options });
      rooms.push(room);
      return room;
    },
    async close() {
      for (const room of rooms) void room.leave();
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolve with the next payload of `event` on `room` (rejects after `ms`). */
export function nextEvent<E extends keyof RoomEvents>(room: Room, event: E, ms = 5000): Promise<RoomEvents[E]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`no ${String(event)} within ${ms} ms`));
    }, ms);
    const off = room.on(event, (payload) => {
      clearTimeout(timer);
      off();
      resolve(payload);
    });
  });
}

/** Poll `check` until it returns true (rejects after `ms`). For state that settles by events. */
export async function until(check: () => boolean | Promise<boolean>, ms = 5000, what = 'condition'): Promise<void> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`${what} not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Expect a promise to reject with an SdkError of this code; returns the error. */
export async function rejectsWith(promise: Promise<unknown>, code: string): Promise<{ code: string; kind: string; reason?: string; message: string }> {
  try {
    await promise;
  } catch (err) {
    const e = err as { code?: string; kind: string; reason?: string; message: string };
    if (e.code !== code) throw new Error(`expected ${code}, got ${e.code ?? String(err)}: ${e.message}`);
    return e as { code: string; kind: string; message: string };
  }
  throw new Error(`expected a rejection with ${code}, but it resolved`);
}

export const ROOM_GRANT = { canPublish: true, canSubscribe: true, canPublishData: true } as const;
