import { randomBytes } from 'node:crypto';
import type { WireError } from '../src/protocol/messages.ts';
import { presenceKey } from './rooms/presence.ts';
import type { Member, MemberLink, Room } from './rooms/types.ts';

/** A member's right to come back on a new connection. */
export interface Seat {
  readonly member: Member;
  readonly room: Room;
  /** The API key its token was signed with: a revoked key cannot resume. */
  readonly apiKey: string;
  /** While the member is away: the timer that gives the seat up. */
  timer: ReturnType<typeof setTimeout> | null;
  /** Set when the member was closed while away: what its resume is told. */
  ended: WireError | null;
}

/**
 * Resume credentials: issued at each join and resume, bound to one member of one room, valid
 * while the member is in the room or away within its grace period. Never the join token: an
 * expired token does not end a live session, and a credential is worthless once its seat ends.
 */
export class Seats {
  private readonly byCredential = new Map<string, Seat>();
  private readonly credentialOf = new Map<Member, string>();
  private awayNow = 0;
  /** Members away now, by their token (`presenceKey`). */
  private readonly awayByToken = new Map<string, number>();

  /** Signs each credential issued (a cluster node: so that any node knows its own cluster's). */
  seal: ((credential: string) => string) | null = null;
  /** Told of each credential issued (a cluster node keeps it with the room's record in Redis). */
  onIssue: ((member: Member, room: Room, credential: string) => void) | null = null;

  /**
   * @param prefix what a credential of a seat in `room` starts with (on a cluster: the node and
   *   the room, so that any node finds the seat, or the room's next home once the node is gone)
   */
  constructor(
    private readonly prefix: (room: Room) => string = () => '',
    /**
     * Seats held at once for members away, three quarters of them at most for one token (a
     * quarter stays for every other token's): past either, a
     * member whose connection drops leaves at once (its client joins again). Held seats keep
     * their members, each as much as a connection keeps, with no connection counted: a shared
     * token joining and dropping its sockets in a loop held 42,000 of them past
     * `--max-connections` 1,000, and with one cap alone it would take every other member's
     * resume away.
     */
    readonly maxAway = Infinity,
  ) {}

  /** Members away on their grace period now. */
  get away(): number {
    return this.awayNow;
  }

  /** A fresh credential for `member` (the previous one stops working). */
  issue(member: Member, room: Room, apiKey: string): string {
    const unsigned = this.prefix(room) + randomBytes(24).toString('base64url');
    const credential = this.seal ? this.seal(unsigned) : unsigned;
    this.restore(member, room, apiKey, credential);
    this.onIssue?.(member, room, credential);
    return credential;
  }

  /** The member's current credential, if it has a seat. */
  credential(member: Member): string | undefined {
    return this.credentialOf.get(member);
  }

  /** The seat of `member` under a credential issued before (by a node that is gone). */
  restore(member: Member, room: Room, apiKey: string, credential: string): void {
    this.forget(member);
    const before = this.byCredential.get(credential);
    if (before) this.forget(before.member);
    this.byCredential.set(credential, { member, room, apiKey, timer: null, ended: null });
    this.credentialOf.set(member, credential);
  }

  /** The seat of a credential, if it is still good (its timer is cancelled: the member is back). */
  take(credential: string): Seat | WireError {
    const seat = this.byCredential.get(credential);
    if (!seat) return { code: 'NOT_FOUND', kind: 'Request', reason: 'resume-unknown', message: 'this session can no longer be resumed: join again' };
    if (seat.ended) {
      this.forget(seat.member);
      return seat.ended;
    }
    this.back(seat);
    return seat;
  }

  /** The member's connection dropped: hold the seat for `graceMs`, then `expire`. */
  hold(member: Member, graceMs: number, expire: () => void): boolean {
    const credential = this.credentialOf.get(member);
    const seat = credential ? this.byCredential.get(credential) : undefined;
    if (!seat || graceMs <= 0) return false;
    const token = presenceKey(member);
    if (seat.timer === null && (this.awayNow >= this.maxAway || (this.awayByToken.get(token) ?? 0) >= Math.max(1, Math.floor((this.maxAway * 3) / 4)))) return false;
    this.back(seat);
    this.awayNow++;
    this.awayByToken.set(token, (this.awayByToken.get(token) ?? 0) + 1);
    seat.timer = setTimeout(() => {
      this.back(seat);
      this.forget(member);
      expire();
    }, graceMs);
    seat.timer.unref?.();
    return true;
  }

  /** The seat is no longer held for an absent member. */
  private back(seat: Seat): void {
    if (seat.timer === null) return;
    clearTimeout(seat.timer);
    seat.timer = null;
    this.awayNow--;
    const token = presenceKey(seat.member);
    const left = (this.awayByToken.get(token) ?? 1) - 1;
    if (left > 0) this.awayByToken.set(token, left);
    else this.awayByToken.delete(token);
  }

  /** The member was closed while away (removed, room ended...): its resume gets `why`. */
  endWhileAway(member: Member, why: WireError): void {
    const credential = this.credentialOf.get(member);
    const seat = credential ? this.byCredential.get(credential) : undefined;
    if (!seat) return;
    seat.ended = why;
  }

  /** The member left for good. */
  forget(member: Member): void {
    const credential = this.credentialOf.get(member);
    if (credential === undefined) return;
    const seat = this.byCredential.get(credential);
    if (seat) this.back(seat);
    this.byCredential.delete(credential);
    this.credentialOf.delete(member);
  }

  dispose(): void {
    for (const seat of this.byCredential.values()) this.back(seat);
    this.byCredential.clear();
    this.credentialOf.clear();
  }
}

/** What a member away on its grace period is reached through: nothing is sent; a close ends it. */
export class AwayLink implements MemberLink {
  readonly bufferedAmount = 0;

  constructor(private readonly onClose: (code: number, reason: string) => void) {}

  send(): void {}
  sendRaw(): void {}
  sendBinary(): void {}
  close(code: number, reason: string): void {
    this.onClose(code, reason);
  }
}
