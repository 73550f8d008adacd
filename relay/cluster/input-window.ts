/**
 * Members' stream chunks on their way to their rooms' homes through Redis, not yet taken by the
 * home. Redis cuts a subscriber that falls 32 MiB behind (its default pubsub output limit), and
 * a home whose subscriber is cut loses every member that reaches it through another node: a
 * hundred members of one shared token, each within its own byte budget, sending chunks faster
 * than the home reads them, did exactly that. So what is in flight is bounded per token and per
 * home, well under that limit; past either, the members' binary frames wait (the frame gate stops
 * reading their sockets) until the home says it has taken what was sent.
 */

/** Bytes one token's members on this node may have in flight to one home. */
export const TOKEN_WINDOW = 2 * 1024 * 1024;
/** Bytes all members on this node may have in flight to one home. */
export const HOME_WINDOW = 8 * 1024 * 1024;
/** How long a member over a window waits before its frame gate looks again (ms). */
export const WINDOW_WAIT_MS = 5;
/**
 * A window the home has not answered for this long while it is full is emptied (ms): the home's
 * acknowledgements were lost (Redis went away, the home died), and the links will be dropped
 * and resumed anyway.
 */
export const STALE_MS = 5_000;

interface Flight {
  bytes: number;
  /** When the home last took some of it, or when it was first sent. */
  takenAt: number;
}

export class InputWindows {
  private readonly homes = new Map<string, Flight>();
  private readonly tokens = new Map<string, Flight>();

  constructor(
    private readonly tokenWindow = TOKEN_WINDOW,
    private readonly homeWindow = HOME_WINDOW,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** `bytes` of a member of `token` went to `home`. */
  sent(home: string, token: string, bytes: number): void {
    add(this.homes, home, bytes, this.now());
    add(this.tokens, tokenKey(home, token), bytes, this.now());
  }

  /** The home took `bytes` of what members of `token` sent it. */
  taken(home: string, token: string, bytes: number): void {
    take(this.homes, home, bytes, this.now());
    take(this.tokens, tokenKey(home, token), bytes, this.now());
  }

  /** How long a member of `token` should wait before sending `home` more (ms; 0: now). */
  waitMs(home: string, token: string): number {
    const now = this.now();
    const over = (map: Map<string, Flight>, key: string, window: number) => {
      const flight = map.get(key);
      if (!flight || flight.bytes <= window) return false;
      if (now - flight.takenAt <= STALE_MS) return true;
      map.delete(key);
      return false;
    };
    return over(this.homes, home, this.homeWindow) || over(this.tokens, tokenKey(home, token), this.tokenWindow) ? WINDOW_WAIT_MS : 0;
  }

  /** What `home` has not taken yet (for tests and metrics). */
  inFlight(home: string): number {
    return this.homes.get(home)?.bytes ?? 0;
  }

  /** The home is gone: nothing of it is waited for any more. */
  forget(home: string): void {
    this.homes.delete(home);
    const prefix = `${home}\u0000`;
    for (const key of this.tokens.keys()) if (key.startsWith(prefix)) this.tokens.delete(key);
  }

  /** Forget every home (Redis was away: what was in flight is lost). */
  clear(): void {
    this.homes.clear();
    this.tokens.clear();
  }
}

const tokenKey = (home: string, token: string) => `${home}\u0000${token}`;

function add(map: Map<string, Flight>, key: string, bytes: number, now: number): void {
  const flight = map.get(key);
  if (flight) flight.bytes += bytes;
  else map.set(key, { bytes, takenAt: now });
}

function take(map: Map<string, Flight>, key: string, bytes: number, now: number): void {
  const flight = map.get(key);
  if (!flight) return;
  flight.bytes -= bytes;
  flight.takenAt = now;
  if (flight.bytes <= 0) map.delete(key);
}
