/**
 * A Node process that joins, is cut off, and leaves while reconnecting (or, with `argv[3]` `open`,
 * leaves at once while connected): it must then exit on its own (nothing of the SDK's left
 * running). Its relay is the test's fake (`argv[2]`); it prints `left` once `leave()` resolved,
 * and its exit code says nothing: the test times the exit.
 */
import { WebSocket as NodeWebSocket } from 'ws';
import { Sdk } from '../src/sdk.ts';

(globalThis as { WebSocket?: unknown }).WebSocket ??= NodeWebSocket;

const room = await Sdk.join({ url: process.argv[2]!, token: 'x.y.z', autoSubscribe: false, heartbeatMs: 60_000, reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxTimeMs: 60_000 } });
if (process.argv[3] !== 'open') {
  await new Promise<void>((resolve) => room.on('reconnecting', () => resolve()));
  // the reconnection's handshake is under way (the test's relay holds it)
  await new Promise((resolve) => setTimeout(resolve, 300));
}
await room.leave();
process.stdout.write('left\n');
