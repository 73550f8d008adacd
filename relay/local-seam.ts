import type { RequestFrame, ResumeFrame } from '../src/protocol/messages.ts';
import type { RelayContext, RequestScope } from './context.ts';
import { TokenBucket } from './data/token-bucket.ts';
import { dispatch, type Answerer } from './dispatch.ts';
import { enter, snapshot, type Verdict } from './join.ts';
import { waitInLobby } from './lobby-wait.ts';
import { holdSeat, takeSeat } from './resume.ts';
import type { Member, Room } from './rooms/types.ts';
import type { Entered, LobbyJoiner, LobbyPlace, MemberConnection, RoomPort, RoomSeam } from './seam.ts';
import type { Refusal } from './token/verify.ts';
import type { WireError } from '../src/protocol/messages.ts';

/** A member of a room of this relay, as its connection holds it. */
class LocalPort implements RoomPort {
  private readonly scope: Omit<RequestScope, 'after'>;

  constructor(
    private readonly relay: RelayContext,
    readonly member: Member,
    private readonly room: Room,
    private readonly link: MemberConnection,
  ) {
    const { config } = relay;
    this.scope = {
      relay,
      member,
      room,
      limiter: new TokenBucket(config.messageRate, config.messageBurst),
      bytes: new TokenBucket(config.dataByteRate, Math.max(config.dataByteBurst, config.maxPayloadBytes)),
      flooding: () => this.link.flooded(),
    };
  }

  get roomId(): string {
    return this.room.id;
  }

  request(request: RequestFrame, out: Answerer): Promise<void> {
    return dispatch(this.scope, request, out);
  }

  chunk(frame: Buffer): void {
    this.room.streams.chunk(this.member, frame);
  }

  owes(): number {
    return this.member.fanout.msUntilToken(0);
  }

  leave(): void {
    // taken over by another connection meanwhile (a resume elsewhere): that one speaks for it now
    if (this.member.link !== this.link) return;
    const { relay, member, room } = this;
    relay.seats.forget(member);
    if (room.remove(member)) relay.log.info('left', { participant: member.id, room: room.id });
    relay.rooms.release(room);
  }

  hold(): boolean {
    if (this.member.link !== this.link) return true;
    return holdSeat(this.relay, this.member, this.room);
  }
}

/**
 * The room seam of a single relay: every room is in this process's memory, so each call is
 * answered at once (an already settled promise), with nothing between the caller and the room.
 */
export class LocalSeam implements RoomSeam {
  constructor(private readonly relay: RelayContext) {}

  /** Enter now: what both a join and a lobby admission do. */
  enterNow(verdict: Verdict, link: MemberConnection): Entered | Refusal {
    const outcome = enter(this.relay, verdict, link);
    if (!('member' in outcome)) return outcome;
    return { port: new LocalPort(this.relay, outcome.member, outcome.room, link), joined: outcome.joined };
  }

  enter(verdict: Verdict, link: MemberConnection): Promise<Entered | Refusal> {
    return Promise.resolve(this.enterNow(verdict, link));
  }

  wait(verdict: Verdict, joiner: LobbyJoiner): Promise<LobbyPlace | Refusal> {
    return Promise.resolve(waitInLobby(this.relay, verdict, joiner, (v, link) => this.enterNow(v, link)));
  }

  resume(frame: ResumeFrame, link: MemberConnection): Promise<Entered | WireError> {
    const seat = takeSeat(this.relay, frame, link);
    if (!('member' in seat)) return Promise.resolve(seat);
    const { member, room } = seat;
    return Promise.resolve({ port: new LocalPort(this.relay, member, room, link), joined: { ...snapshot(this.relay, room, member), resumed: true } });
  }
}
