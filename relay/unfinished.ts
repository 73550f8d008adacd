import * as wsModule from 'ws';
import type { WebSocket } from 'ws';

/**
 * What ws holds of a connection's messages still arriving: the bytes of a frame not yet complete
 * and the payloads of the fragments before a message's last. The frame gate sees only whole
 * messages, so without this a member's socket could keep up to ws's payload limit (1 MiB) for as
 * long as it stays open, a thousand sockets of one token a gigabyte. Read from ws's receiver
 * (ws is pinned; {@link checkWsInternals} fails at start if the fields are gone).
 */
interface ReceiverState {
  _bufferedBytes: number;
  _messageLength: number;
}

function receiverOf(ws: WebSocket): Partial<ReceiverState> | undefined {
  return (ws as unknown as { _receiver?: Partial<ReceiverState> })._receiver;
}

/** Bytes ws holds of `ws`'s messages still arriving (see above). */
export function unfinishedBytes(ws: WebSocket): number {
  const r = receiverOf(ws);
  return (r?._bufferedBytes ?? 0) + (r?._messageLength ?? 0);
}

/** Throws if ws's receiver no longer has the fields {@link unfinishedBytes} reads (an upgrade of ws must not drop the bound silently). */
export function checkWsInternals(): void {
  const Receiver = (wsModule as unknown as { Receiver?: new () => unknown }).Receiver;
  const r = (Receiver ? new Receiver() : {}) as Partial<ReceiverState> & { _maxPayload?: unknown };
  if (typeof r._bufferedBytes !== 'number' || typeof r._messageLength !== 'number' || typeof r._maxPayload !== 'number') {
    throw new Error('ws: the receiver fields the relay bounds (_bufferedBytes, _messageLength, _maxPayload) are gone; check relay/unfinished.ts against this ws version');
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
