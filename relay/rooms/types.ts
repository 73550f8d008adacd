import type { StreamBoard, StreamLimits } from '../data/streams.ts';
import type { KeptMessage, TopicBoard, TopicLimits } from '../data/topics.ts';
import type { Logger } from '../log.ts';
import type { OutputBoard, ProviderFactories } from '../outputs/board.ts';
import type { Lobby } from './lobby.ts';
import type { MediaBoard } from '../media/board.ts';
import type { MediaEngine } from '../media/engine.ts';
import type { Timeline } from './timeline.ts';
import type { RelayBudgets } from '../budget.ts';
import type { ParticipantCounts, ParticipantInfo, ParticipantSummary, ServerFrame, Tier } from '../../src/protocol/messages.ts';
import type { LobbyRequest, OutputChange } from '../../src/protocol/control.ts';

import type { Member } from './member.ts';

export type { Member, MemberLink } from './member.ts';

/** A position in a walk over one tier: the join sequence number of the last entry returned. */
export interface TierCursor {
  readonly tier: Tier;
  readonly position: number;
}

/** One page of a tier walk. */
export interface TierPage {
  participants: ParticipantSummary[];
  /** Where to continue, or `null` when the walk is complete. */
  next: TierCursor | null;
}

/**
 * The state and fan-out of one room. In memory today; the interface is what relay nodes
 * sharing rooms would implement over Redis.
 */
export interface Room {
  readonly id: string;
  /** The project whose keys opened it: rooms of two projects never meet, whatever their ids. */
  readonly project: string;
  /** Unix milliseconds at which it was opened. */
  readonly createdAt: number;
  /** What kind of token opened it (whose quota it counts against). */
  readonly opener: Opener;
  /** It ended (or the relay let it go): nothing more may be kept, started or sent in it. */
  readonly ended: boolean;
  /** Pubsub subscriptions and history. */
  readonly topics: TopicBoard;
  /** Data streams in flight. */
  readonly streams: StreamBoard;
  /** Joiners waiting for a moderator. */
  readonly lobby: Lobby;
  /** Recording, HLS, livestream, transcription, whiteboard. */
  readonly outputs: OutputBoard;
  /** What happens in the room, for the outputs. */
  readonly timeline: Timeline;
  /** Published tracks and subscriptions. */
  readonly media: MediaBoard;
  get(participantId: string): Member | undefined;
  /** True when a pinned token has joined under this id during the room's lifetime. */
  pinnedIdentity(participantId: string): boolean;
  /** Every id a pinned token has joined under during the room's lifetime. */
  pinnedIdentities(): IterableIterator<string>;
  /** Reserve an id as pinned (a room restored on another node keeps what its last home reserved). */
  reserveIdentity(participantId: string): void;
  /** Every member, on stage and in the audience. */
  members(): IterableIterator<Member>;
  /**
   * Add a member (its `participant-joined` goes to the others when it is on stage, unless
   * `announce` is false: a room restored from its record, whose members are all away), at the end
   * of its tier's join order, or at `position` when that is past every position given so far.
   */
  add(member: Member, position?: number, announce?: boolean): void;
  /** The member's position in its tier's join order (what cursors hold). */
  position(participantId: string): number | undefined;
  /** Remove a member if it is this very member (a taken-over identity is left alone). */
  remove(member: Member): boolean;
  counts(): ParticipantCounts;
  /** On-stage members in join order, except `exceptId`. */
  stage(exceptId?: string): ParticipantInfo[];
  /** A page of a tier in join order; `after` is a cursor from a previous page. */
  page(tier: Tier, after: TierCursor | null, limit: number): TierPage;
  /** Serialise once and send to every member (optionally but one). */
  broadcast(frame: ServerFrame, exceptId?: string, optional?: boolean): void;
  /**
   * Send `full` to the members `sees` picks and `reduced` to the others, each serialised once
   * (an output's URL reaches only those allowed to follow it); `reduced` `null`: nothing to the others.
   */
  broadcastSplit(full: ServerFrame, reduced: ServerFrame | null, sees: (member: Member) => boolean): void;
  /** Serialise once and send to the members with `canModerate`. */
  toModerators(frame: ServerFrame): void;
  readonly size: number;
  /** Stop timers and outputs; the room is gone. */
  dispose(): void;
}

/** What a room needs to know of the relay's configuration. */
export interface RoomLimits extends TopicLimits, StreamLimits {
  countIntervalMs: number;
  /** Bytes of pubsub history the room keeps. */
  historyBytesPerRoom: number;
  /** Bytes of reserved identities the room keeps (see {@link Room.reserveIdentity}). */
  reservedIdsBytesPerRoom: number;
  /** How long an output may take to start (ms). */
  outputStartTimeoutMs: number;
}

/** What a room is made with. */
export interface RoomServices {
  limits: RoomLimits;
  providers: ProviderFactories;
  log: Logger;
  /** Forwards media; `null` runs a relay without media. */
  media: MediaEngine | null;
  /** Relay-wide ceilings the room's budgets charge too. */
  budgets: RelayBudgets;
  /** Told of the room's life (webhooks); absent, nobody is. */
  observer?: RoomObserver;
}

/**
 * What happens to rooms, for those outside them (the webhooks). Called synchronously on the
 * room's own path: an implementation queues and returns, it never waits. A room that is gone
 * (`roomFinished`) reports nothing more: the members it still held left with it.
 */
export interface RoomObserver {
  roomStarted(room: Room): void;
  roomFinished(room: Room): void;
  participantJoined(room: Room, member: Member): void;
  participantLeft(room: Room, member: Member): void;
  lobbyRequest(room: Room, request: LobbyRequest): void;
  outputChanged(room: Room, change: OutputChange): void;
  /** A persisted message was kept (only observers that keep history implement these). */
  historyKept?(room: Room, message: KeptMessage): void;
  /** A kept message was let go (over the topic's count or the room's bytes). */
  historyForgotten?(room: Room, seq: number): void;
  /** A reserved identity made way for a newer one (the room's reservations are full). */
  identityReleased?(room: Room, participantId: string): void;
  /** Whether this observer wants `historyKept` and `historyForgotten` (a room asks once, when it opens). */
  readonly wantsHistory?: boolean;
}

/** Who opens a room: a room-scoped token, or a domain-wide one (with its own, smaller quota). */
export type Opener = 'room' | 'domain';

/** All rooms of the relay, by project and room id. */
export interface RoomRegistry {
  get(project: string, roomId: string): Room | undefined;
  getOrCreate(project: string, roomId: string, opener: Opener): Room;
  /** Forget a room (it ended, or the relay stops): its members must have been closed. */
  delete(room: Room): void;
  /** Forget a room if nobody is in it or waiting in its lobby: called whenever someone leaves either. */
  release(room: Room): void;
  /** Run `fn` with `room` kept open however empty it becomes meanwhile (a member's takeover by a new connection). */
  keep<T>(room: Room, fn: () => T): T;
  /** Rooms open now, and how many of them a project's domain-wide tokens opened. */
  readonly size: number;
  /** Rooms open now that domain-wide tokens opened: of one project, or of all. */
  openedByDomain(project?: string): number;
  /** Rooms of one project open now, whoever opened them. */
  countIn(project: string): number;
  /** The rooms of one project (in no particular order). */
  inProject(project: string): IterableIterator<Room>;
  [Symbol.iterator](): IterableIterator<Room>;
}
