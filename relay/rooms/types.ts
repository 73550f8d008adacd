import type { EffectiveGrant } from '../../src/protocol/grant.ts';
import type { StreamBoard, StreamLimits } from '../data/streams.ts';
import type { TopicBoard, TopicLimits } from '../data/topics.ts';
import type { OutputName } from '../../src/protocol/control.ts';
import type { Logger } from '../log.ts';
import type { OutputBoard, ProviderFactory } from '../outputs/board.ts';
import type { Lobby } from './lobby.ts';
import type { MediaBoard } from '../media/board.ts';
import type { MediaEngine } from '../media/engine.ts';
import type { Timeline } from './timeline.ts';
import type { ParticipantCounts, ParticipantInfo, ParticipantSummary, ServerFrame, Tier } from '../../src/protocol/messages.ts';

/**
 * The relay's link to one connected participant. Rooms only see this: a room on another relay
 * node (through Redis, later) would hold a remote implementation of it.
 */
export interface MemberLink {
  /** Send a frame already serialised (fan-out serialises once per room, not once per member). */
  sendRaw(data: Buffer): void;
  /** Send a binary frame (a stream chunk), as is. */
  sendBinary(data: Uint8Array): void;
  send(frame: ServerFrame): void;
  close(code: number, reason: string): void;
  /** Bytes queued for this member and not yet written to the network. */
  readonly bufferedAmount: number;
}

/** A participant inside a room. */
export interface Member {
  readonly id: string;
  readonly name: string;
  readonly tier: Tier;
  readonly joinedAt: number;
  readonly grant: EffectiveGrant;
  /** Whether the token pinned this identity (decides duplicate-identity takeover). */
  readonly pinned: boolean;
  /** Expiry of the token the member joined with, unix seconds. */
  readonly tokenExp: number;
  /** The signature of that token: what a removal bans. */
  readonly tokenSignature: string;
  /** The API key of its token (a resume with a revoked key is refused). */
  readonly apiKey: string;
  /** Its connection; replaced when the member resumes on a new one. */
  link: MemberLink;
}

/** An opaque position in a walk over one tier, held by the relay for a client's cursor. */
export interface TierCursor {
  readonly tier: Tier;
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
  /** Every member, on stage and in the audience. */
  members(): IterableIterator<Member>;
  /** Add a member (its `participant-joined` goes to the others when it is on stage). */
  add(member: Member): void;
  /** Remove a member if it is this very member (a taken-over identity is left alone). */
  remove(member: Member): boolean;
  counts(): ParticipantCounts;
  /** On-stage members in join order, except `exceptId`. */
  stage(exceptId?: string): ParticipantInfo[];
  /** A page of a tier in join order; `after` is a cursor from a previous page. */
  page(tier: Tier, after: TierCursor | null, limit: number): TierPage;
  /** Serialise once and send to every member (optionally but one). */
  broadcast(frame: ServerFrame, exceptId?: string): void;
  /** Serialise once and send to the members with `canModerate`. */
  toModerators(frame: ServerFrame): void;
  readonly size: number;
  /** Stop timers and outputs; the room is gone. */
  dispose(): void;
}

/** What a room needs to know of the relay's configuration. */
export interface RoomLimits extends TopicLimits, StreamLimits {
  countIntervalMs: number;
}

/** What a room is made with. */
export interface RoomServices {
  limits: RoomLimits;
  providers: Readonly<Record<OutputName, ProviderFactory>>;
  log: Logger;
  /** Forwards media; `null` runs a relay without media. */
  media: MediaEngine | null;
}

/** All rooms of the relay. */
export interface RoomRegistry {
  get(roomId: string): Room | undefined;
  getOrCreate(roomId: string): Room;
  /** Forget a room (it is empty, or it ended). */
  delete(roomId: string): void;
  readonly size: number;
  [Symbol.iterator](): IterableIterator<Room>;
}
