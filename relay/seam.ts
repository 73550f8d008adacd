/**
 * The room seam: everything a connection does with a room goes through it, asynchronously, so
 * that the room may live on this relay (`LocalSeam`, the default) or on another node of a
 * cluster. Below it, a room's own logic (admission, handlers, fan-out) runs where the room lives,
 * synchronously: two entries of one identity never interleave.
 */
import type { JoinedFrame, RequestFrame, ResumeFrame, ServerFrame, WireError } from '../src/protocol/messages.ts';
import type { Answerer } from './dispatch.ts';
import type { Verdict } from './join.ts';
import type { Member, MemberLink } from './rooms/types.ts';
import type { Refusal } from './token/verify.ts';

/** The connection a member is reached through: its link, and where its budgets are enforced. */
export interface MemberConnection extends MemberLink {
  /** The member was refused for its rate: a connection refused again and again is cut. */
  flooded(): void;
  /** Cut the socket as a lost network would (its room's node is gone): the client comes back by itself. */
  drop(): void;
}

/** Who a port speaks for. */
export type PortMember = Pick<Member, 'id' | 'tier' | 'project' | 'tokenKey' | 'domainWide'>;

/** What a connection holds of the room it joined, wherever the room lives. */
export interface RoomPort {
  readonly roomId: string;
  readonly member: PortMember;
  /** Run one request of the member through the room's handler table and answer it through `out`. */
  request(request: RequestFrame, out: Answerer): Promise<void>;
  /** A binary frame of the member (a stream chunk). */
  chunk(frame: Buffer): void;
  /** How long until the member has paid for what its binary frames cost (ms; 0 when it owes nothing). */
  owes(): number;
  /** The member leaves for good. */
  leave(): void;
  /** Its connection dropped: its seat is held for the grace period. False when there is none (it then leaves). */
  hold(): boolean;
}

/** A member in its room: its port, and the frame to answer its join or resume with. */
export interface Entered {
  port: RoomPort;
  joined: JoinedFrame;
}

/** The connection of a joiner that waits in a lobby. */
export interface LobbyJoiner {
  /** Whether it is still waiting (not gone, not refused). */
  readonly waitingForLobby: boolean;
  /** What the member will be reached through once admitted. */
  readonly link: MemberConnection;
  /** A moderator admitted it: it is in the room. */
  admitted(entered: Entered): void;
  /** End the wait with an error: the join fails with it. */
  leaveLobby(error: WireError): void;
  send(frame: ServerFrame): void;
}

/** A joiner's place in a lobby. */
export interface LobbyPlace {
  /** The joiner went away: its request is withdrawn. */
  cancel(): void;
}

/** Where connections enter rooms. */
export interface RoomSeam {
  /** Enter the room `verdict` names (the identity rules, the room's capacity), or why not. */
  enter(verdict: Verdict, link: MemberConnection): Promise<Entered | Refusal>;
  /** Wait in the room's lobby until a moderator decides (`joiner.admitted` or `joiner.leaveLobby`), or why it may not wait. */
  wait(verdict: Verdict, joiner: LobbyJoiner): Promise<LobbyPlace | Refusal>;
  /** Come back to a held seat on `link`, or why not. */
  resume(frame: ResumeFrame, link: MemberConnection): Promise<Entered | WireError>;
}
