import type { LobbyPlace, RoomPort } from '../seam.ts';
import type { Flow, FrameScheduler } from '../scheduler.ts';
import { presenceKey } from '../rooms/presence.ts';
import type { RemoteLink } from './links.ts';

/** At the home, a member (or lobby joiner) whose connection is on another node. */
export interface Guest {
  readonly link: RemoteLink;
  port?: RoomPort;
  place?: LobbyPlace;
  /** Its token's share of this node (as its own connections here would have): what it asks runs in its turns. */
  flow?: Flow;
}

/**
 * Turns one token's guests may have waiting here: past it their requests are refused at once
 * (`RATE_LIMITED`) and their chunks dropped (their stream then aborts), so that a flood arriving
 * through other nodes waits in its flow without piling up in memory (their nodes bound it too:
 * chunks by their input windows, requests by each connection's frame budget).
 */
export const MAX_GUEST_TURNS = 256;

/**
 * The guests of the rooms homed here, by their node and link, each member in its token's flow
 * of the scheduler, as a connection to this node would be: a flood arriving through another
 * node is fair-queued against this node's own members like one arriving here (handled straight
 * off the bus, a hundred members of one token on another node held every member here back).
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
    if (guest.port) guest.flow = this.scheduler.join(presenceKey(guest.port.member));
    this.guests.set(key, guest);
  }

  delete(key: string): boolean {
    const guest = this.guests.get(key);
    if (!guest) return false;
    this.guests.delete(key);
    if (guest.flow) this.scheduler.leave(guest.flow);
    return true;
  }

  values(): IterableIterator<Guest> {
    return this.guests.values();
  }

  entries(): Array<[string, Guest]> {
    return [...this.guests];
  }

  /**
   * Run `work` of the guest at `key` in its token's turn, if it is still that guest then; `after`
   * runs then in any case. False (nothing run) when its token has {@link MAX_GUEST_TURNS} waiting.
   */
  run(key: string, guest: Guest, work: (guest: Guest) => void, after?: () => void): boolean {
    const go = () => {
      if (this.guests.get(key) === guest) work(guest);
      after?.();
    };
    if (!guest.flow) go();
    else if (guest.flow.waiting >= MAX_GUEST_TURNS) return false;
    else this.scheduler.runInTurn(guest.flow, go);
    return true;
  }
}
