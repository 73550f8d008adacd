/**
 * Closing a socket to the relay without waiting on the relay. A WebSocket's close waits for the
 * peer's closing handshake; Node's `ws` waits up to 30 s for it on a timer of its own, which
 * keeps the process alive, so a relay that never answers (or is gone) held a Node process that
 * had left for 30 s. A browser keeps that time itself and has nothing to cut.
 */

/** How long a socket the SDK closes waits for the relay's closing handshake before it is cut (Node's `ws` only). */
export const CLOSE_GRACE_MS = 1000;

/** A socket as the SDK closes it: a browser's `WebSocket`, or Node's `ws` (which can `terminate()`). */
type ClosingSocket = Pick<WebSocket, 'close' | 'readyState'> & { terminate?: () => void };

/**
 * Close `ws` with `code` and `reason`; where the implementation can cut a socket (Node's `ws`),
 * cut it if the relay has not completed the close within `graceMs` (`0`: at once and without a
 * close frame, for a socket already taken for dead).
 */
export function closeSocket(ws: ClosingSocket, code: number, reason: string, graceMs = CLOSE_GRACE_MS): void {
  const terminate = ws.terminate;
  // a socket taken for dead is cut without a closing handshake where it can be (the relay sees the link die and holds the seat)
  if (graceMs <= 0 && typeof terminate === 'function') return terminate.call(ws);
  if (ws.readyState <= 1) ws.close(code, reason);
  if (typeof terminate !== 'function' || ws.readyState === 3) return;
  const timer = setTimeout(() => {
    if (ws.readyState !== 3) terminate.call(ws);
  }, graceMs);
  (timer as { unref?: () => void }).unref?.();
}
