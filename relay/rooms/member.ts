/**
 * A participant as rooms and their boards see it, and its link: a leaf module, so that the
 * boards a room is made of (topics, streams, outputs, media) depend on it without depending on
 * the room.
 */
import type { EffectiveGrant } from '../../src/protocol/grant.ts';
import type { ServerFrame, Tier } from '../../src/protocol/messages.ts';
import type { FanoutBudget } from '../data/fanout-budget.ts';

/**
 * The relay's link to one connected participant. Rooms only see this: a room on another relay
 * node (through Redis, later) would hold a remote implementation of it.
 */
export interface MemberLink {
  /**
   * Send a frame already serialised (fan-out serialises once per room, not once per member).
   * `optional` traffic (pubsub, whiteboard) is skipped for a member that is not keeping up,
   * rather than growing its queue until it is cut. A `lazy` frame (an arrival, a departure, a
   * count) may wait a moment for the member's next frame, to go out in the same write.
   */
  sendRaw(data: Buffer, optional?: boolean, lazy?: boolean): void;
  /** Send a binary frame (a stream chunk), as is. */
  sendBinary(data: Uint8Array): void;
  send(frame: ServerFrame): void;
  close(code: number, reason: string): void;
  /** Another connection took the member over (a resume): end quietly, the member lives on. */
  replaced?(): void;
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
  /** What that token means (`tokenKey`): what a removal bans. */
  readonly tokenKey: string;
  /** The API key of its token (a resume with a revoked key is refused). */
  readonly apiKey: string;
  /** The project of that key. */
  readonly project: string;
  /**
   * Whether its token is domain-wide (no `roomId`): what it holds (subscriptions) counts against
   * its project's part of the relay's pools (see `DomainBudgets`).
   */
  readonly domainWide: boolean;
  /** Its connection; replaced when the member resumes on a new one. */
  link: MemberLink;
  /**
   * Bytes per second its sends may make the relay send to others (a message's bytes times its
   * recipients): what it costs the relay, not what it costs the sender.
   */
  readonly fanout: FanoutBudget;
}
