import { Budget } from '../budget.ts';
import { Fifo } from '../fifo.ts';
import type { LobbyPlace, RoomPort } from '../seam.ts';
import type { Flow, FrameScheduler, Turn } from '../scheduler.ts';
import { presenceKey } from '../rooms/presence.ts';
import type { RemoteLink } from './links.ts';

/**
 * Requests one guest may have waiting here: past it they are refused at once (`RATE_LIMITED`),
 * as a connection here would have its frames held back by its frame budget (its node bounds
 * its chunks by their input window, so those always wait their turn).
 */
export const MAX_GUEST_WAITING = 1024;
/**
 * Bytes of requests one guest may have waiting here, as a connection here may have held back
 * (2 MiB); they count in half of the relay's `--max-held-total`. By count alone, 1,024 requests of up
 * to 1 MiB each could wait per guest, counted nowhere.
 */
export const MAX_GUEST_WAITING_BYTES = 2 * 1024 * 1024;

/** At the home, a member (or lobby joiner) whose connection is on another node. */
export interface Guest {
  readonly link: RemoteLink;
  port?: RoomPort;
  place?: LobbyPlace;
  /** Its turns in its token's flow of the scheduler (a seated guest only). */
  turn?: GuestTurn;
}

/**
 * What one guest asked, waiting in its token's flow of the scheduler as one connection's frames
 * do: one turn per guest, however much waits, so a token's guests take turns among themselves
 * and with its connections here.
 */
class GuestTurn implements Turn {
  queued = false;
  private readonly work = new Fifo<{ fn: () => void; charged: number }>();
  /** Bytes of what waits, as charged to the relay's held budget. */
  private bytes = 0;

  constructor(
    readonly flow: Flow,
    private readonly scheduler: FrameScheduler,
    private readonly held: Budget | null,
  ) {}

  get waiting(): number {
    return this.work.length;
  }

  /**
   * Run `fn` now if nothing waits and the relay has time, else in this guest's turn. `bounded`:
   * refused (false) when {@link MAX_GUEST_WAITING} requests or {@link MAX_GUEST_WAITING_BYTES}
   * wait already, or the relay's held budget has no room for `bytes`; else it waits whatever it
   * costs (a stream chunk: its node bounds those by their input window).
   */
  add(fn: () => void, size: number | (() => number), bounded: boolean): boolean {
    if (this.work.length === 0 && this.scheduler.open) {
      this.scheduler.runNow(this.flow, fn);
      return true;
    }
    let charged = 0;
    if (bounded) {
      if (this.work.length >= MAX_GUEST_WAITING) return false;
      // measured only when it must wait
      const bytes = typeof size === 'function' ? size() : size;
      if (this.bytes + bytes > MAX_GUEST_WAITING_BYTES) return false;
      if (this.held && !this.held.take(bytes)) return false;
      charged = bytes;
    }
    this.bytes += charged;
    this.work.push({ fn, charged });
    this.scheduler.enqueue(this);
    return true;
  }

  step(): boolean {
    const next = this.work.shift();
    if (next) {
      this.bytes -= next.charged;
      this.held?.give(next.charged);
      next.fn();
    }
    return this.work.length > 0;
  }
}

/**
 * The guests of the rooms homed here, by their node and link, each in its token's flow of the
 * scheduler as a connection to this node would be: a flood arriving through another node is
 * fair-queued against this node's own members like one arriving here (handled straight off the
 * bus, a hundred members of one token on another node held every member here back).
 */
export class GuestTable {
  private readonly guests = new Map<string, Guest>();

  /**
   * What guests' waiting requests count in: half of the relay's budget of frames held back, as a
   * part of it. A connection here that finds that budget spent is cut (4011), and guests, only
   * ever refused, could otherwise have spent all of it.
   */
  private readonly held: Budget | null;

  constructor(
    private readonly scheduler: FrameScheduler,
    /** The relay's budget of frames held back (`--max-held-total`). */
    held: Budget | null = null,
  ) {
    this.held = held && new Budget(held.limit / 2, held);
  }

  static key(from: string, link: string): string {
    return `${from}\u0000${link}`;
  }

  get(key: string): Guest | undefined {
    return this.guests.get(key);
  }

  set(key: string, guest: Guest): void {
    this.delete(key);
    if (guest.port) guest.turn = new GuestTurn(this.scheduler.join(presenceKey(guest.port.member)), this.scheduler, this.held);
    this.guests.set(key, guest);
  }

  delete(key: string): boolean {
    const guest = this.guests.get(key);
    if (!guest) return false;
    this.guests.delete(key);
    if (guest.turn) this.scheduler.leave(guest.turn.flow);
    return true;
  }

  values(): IterableIterator<Guest> {
    return this.guests.values();
  }

  entries(): Array<[string, Guest]> {
    return [...this.guests];
  }

  /**
   * Run `work` of the guest at `key` in its turn, if it is still that guest then; `after` runs
   * then in any case. `bounded`: false (nothing queued) when what waits is at its bounds (see
   * {@link GuestTurn.add}); `size`: the request's bytes (or how to measure them, if it waits).
   */
  run(key: string, guest: Guest, work: (guest: Guest) => void, after?: () => void, bounded = true, size: number | (() => number) = 0): boolean {
    const go = () => {
      if (this.guests.get(key) === guest) work(guest);
      after?.();
    };
    if (!guest.turn) {
      go();
      return true;
    }
    return guest.turn.add(go, size, bounded);
  }
}

/** The bytes a guest's request holds while it waits: its payload, and its request as the JSON it came as. */
export function guestRequestBytes(request: unknown, payload: Uint8Array | null): number {
  return (payload?.byteLength ?? 0) + Buffer.byteLength(JSON.stringify(request) ?? '');
}
