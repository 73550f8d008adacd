import * as wsModule from 'ws';
import type { WebSocket } from 'ws';

/**
 * What ws holds of a connection's messages still arriving: the socket reads of a frame not yet
 * complete and the payloads of the fragments before a message's last. The frame gate sees only
 * whole messages, so without this a member's socket could keep up to ws's payload limit (1 MiB)
 * for as long as it stays open, a thousand sockets of one token a gigabyte. Read from ws's
 * receiver (ws is pinned; {@link checkWsInternals} fails at start if the fields are gone).
 */
interface ReceiverState {
  _buffers: Buffer[];
  _fragments: Buffer[];
}

/**
 * What one held piece costs besides its bytes (its Buffer object and its place in ws's list): a
 * thousand one-byte reads held 200 KB.
 */
const PIECE_OVERHEAD = 256;

/**
 * What a socket may hold of a message still arriving without charge: two socket reads, so that a
 * token's sockets each in the middle of a 64 KiB frame (a backend's hundred connections
 * publishing) are not counted against it; the rest is the fixed cost of a connection.
 */
export const UNFINISHED_FREE_BYTES = 128 * 1024;

/**
 * At most this many pieces of one message (fragments), and of socket reads waiting to be parsed:
 * browsers never fragment, and the largest frame the relay accepts (256 KiB) arriving in 256-byte
 * reads is 1,024 of them. ws's own defaults (16,384 and 262,144) let a socket pin a gigabyte with
 * one-byte fragments.
 */
export const WS_PIECE_LIMITS = { maxFragments: 64, maxBufferedChunks: 1024 } as const;

function receiverOf(ws: WebSocket): Partial<ReceiverState> | undefined {
  return (ws as unknown as { _receiver?: Partial<ReceiverState> })._receiver;
}

/**
 * Bytes ws holds of `ws`'s messages still arriving (see above): each piece by the memory it keeps
 * (a one-byte fragment that is a view into a 64 KiB read keeps the read), each memory once.
 */
export function unfinishedBytes(ws: WebSocket): number {
  const r = receiverOf(ws);
  let n = 0;
  let last: ArrayBufferLike | null = null;
  for (const list of [r?._buffers, r?._fragments]) {
    if (!list) continue;
    for (const piece of list) {
      n += PIECE_OVERHEAD;
      // a fragment and the rest of its read share one memory: counted once
      if (piece.buffer !== last) n += piece.buffer.byteLength;
      last = piece.buffer;
    }
  }
  return n;
}

/** Throws if ws's receiver no longer has what {@link unfinishedBytes} reads, or the limits (an upgrade of ws must not drop the bound silently). */
export function checkWsInternals(): void {
  const Receiver = (wsModule as unknown as { Receiver?: new (options: object) => unknown }).Receiver;
  const r = (Receiver ? new Receiver(WS_PIECE_LIMITS) : {}) as Partial<ReceiverState> & { _maxPayload?: unknown; _maxFragments?: unknown; _maxBufferedChunks?: unknown };
  if (!Array.isArray(r._buffers) || !Array.isArray(r._fragments) || typeof r._maxPayload !== 'number' || r._maxFragments !== WS_PIECE_LIMITS.maxFragments || r._maxBufferedChunks !== WS_PIECE_LIMITS.maxBufferedChunks) {
    throw new Error('ws: the receiver fields and limits the relay bounds (_buffers, _fragments, _maxPayload, maxFragments, maxBufferedChunks) are gone; check relay/unfinished.ts against this ws version');
  }
}

/**
 * Unfinished bytes (see {@link unfinishedBytes}) per token and relay-wide: a token's sockets
 * together may hold `perToken`, all sockets `total`. Per token as the scheduler's flows are (its
 * project and signature), since one token can open any number of sockets.
 */
export class UnfinishedBudget {
  private readonly byToken = new Map<string, number>();
  private used = 0;

  constructor(
    private readonly perToken: number,
    private readonly total: number,
  ) {}

  get inUse(): number {
    return this.used;
  }

  /** The relay-wide ceiling. */
  get limit(): number {
    return this.total;
  }

  /** Tokens holding some (for tests). */
  get tokens(): number {
    return this.byToken.size;
  }

  /** Change token `key`'s bytes by `delta`; false, changing nothing, when a rise would pass its share or the relay's ceiling. */
  change(key: string, delta: number): boolean {
    const mine = (this.byToken.get(key) ?? 0) + delta;
    if (delta > 0 && (mine > this.perToken || this.used + delta > this.total)) return false;
    this.used += delta;
    if (mine > 0) this.byToken.set(key, mine);
    else this.byToken.delete(key);
    return true;
  }
}
