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
  private readonly work = new Fifo<() => void>();

  constructor(
    readonly flow: Flow,
    private readonly scheduler: FrameScheduler,
  ) {}

  get waiting(): number {
    return this.work.length;
  }

  add(fn: () => void): void {
    if (this.work.length === 0 && this.scheduler.open) return this.scheduler.runNow(this.flow, fn);
    this.work.push(fn);
    this.scheduler.enqueue(this);
  }

  step(): boolean {
    this.work.shift()?.();
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

  constructor(private readonly scheduler: FrameScheduler) {}

  static key(from: string, link: string): string {
    return `${from}\u0000${link}`;
  }

  get(key: string): Guest | undefined {
    return this.guests.get(key);
  }

  set(key: string, guest: Guest): void {
    this.delete(key);
    if (guest.port) guest.turn = new GuestTurn(this.scheduler.join(presenceKey(guest.port.member)), this.scheduler);
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
   * then in any case. `bounded`: false (nothing queued) when {@link MAX_GUEST_WAITING} wait already.
   */
  run(key: string, guest: Guest, work: (guest: Guest) => void, after?: () => void, bounded = true): boolean {
    const go = () => {
      if (this.guests.get(key) === guest) work(guest);
      after?.();
    };
    if (!guest.turn) go();
    else if (bounded && guest.turn.waiting >= MAX_GUEST_WAITING) return false;
    else guest.turn.add(go);
    return true;
  }
}
