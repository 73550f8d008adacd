import type { GrantFlag } from '../src/protocol/grant.ts';
import { RelayError } from './errors.ts';
import { BROADCAST_CHARGED_MEMBERS, BROADCAST_EVENT_BYTES } from './data/fanout-budget.ts';
import type { RelayConfig } from './config.ts';
import type { Logger } from './log.ts';
import type { Bans } from './rooms/bans.ts';
import type { Seats } from './seats.ts';
import type { Member, Room, RoomRegistry } from './rooms/types.ts';
import type { KeyStore } from './token/keys.ts';
import type { TokenBucket } from './data/token-bucket.ts';
import type { RelayBudgets } from './budget.ts';
import type { FrameScheduler } from './scheduler.ts';
import type { WebhookStats } from './webhooks/queue.ts';
import type { Delivery } from './delivery.ts';

/** Counters the relay keeps for `/metrics`. */
export interface RelayCounters {
  joins: number;
  /** Refused joins by code. */
  refusals: Map<string, number>;
  /** Optional frames (pubsub, whiteboard) not sent to members over their soft send limit. */
  dropped: number;
  /** Connections cut for being slow, flooding, or over the relay-wide send budget. */
  cut: number;
  /** Faults of the relay's own (a frame whose handling threw); each is logged at `error`. */
  faults: number;
  /** Webhook deliveries: delivered, given up, dropped, waiting. */
  readonly webhooks: { readonly stats: WebhookStats; readonly queued: number };
}

/** What every part of the relay shares. */
export interface RelayContext {
  readonly counters: RelayCounters;
  readonly config: RelayConfig;
  readonly keys: KeyStore;
  readonly rooms: RoomRegistry;
  readonly bans: Bans;
  /** Tokens a moderator denied from a lobby, until their cooldown ends. */
  readonly lobbyCooldowns: Bans;
  /** Relay-wide ceilings of what members make the relay hold. */
  readonly budgets: RelayBudgets;
  /** Turns of inbound frames across connections while the relay is busy. */
  readonly frames: FrameScheduler;
  /** Outbound frames queued while a fan-out is delivered in slices (a flow of the same scheduler). */
  readonly delivery: Delivery;
  readonly seats: Seats;
  readonly log: Logger;
}

/** Refuse with INVALID_PERMISSIONS unless the member's grant carries `flag`. */
export function requireFlag(member: Member, flag: GrantFlag, action: string): void {
  if (!member.grant[flag]) {
    throw new RelayError('INVALID_PERMISSIONS', `${action} needs ${flag} in the token's grant`, `missing-${flag}`);
  }
}

/** Where a request runs: who asks, in which room. */
export interface RequestScope {
  readonly relay: RelayContext;
  readonly member: Member;
  readonly room: Room;
  /** Run `fn` once the response to this request has been sent. */
  after(fn: () => void): void;
  /** The member's data-message budget. */
  readonly limiter: TokenBucket;
  /** The member's data-byte budget (pubsub payloads, whiteboard shapes). */
  readonly bytes: TokenBucket;
  /** Note a refusal for exceeding the budget; a client that keeps flooding is cut off. */
  flooding(): void;
}


/**
 * Spend a token of the member's bucket: every data message, stream and media subscription
 * costs one. A client that keeps going past the bucket is cut off (`flooding`).
 */
export function spend(scope: RequestScope, messages = 1): void {
  if (!scope.limiter.take(messages)) {
    scope.flooding();
    throw new RelayError('RATE_LIMITED', `at most ${scope.relay.config.messageRate} messages per second (burst ${scope.relay.config.messageBurst})`, 'message-rate');
  }
}

/**
 * Charge a request every member of the room is told of, `events` events to each member, to the
 * member's fan-out budget like a publish, never refused: for what makes the relay send less (a
 * mute, an unpublish, an output stopped), which must never fail for a member in debt. A toggle
 * flood must alternate with what {@link spendBroadcast} refuses.
 */
export function chargeBroadcast(scope: RequestScope, events = 1): void {
  scope.member.fanout.spend(BROADCAST_EVENT_BYTES * events, Math.min(scope.room.size, BROADCAST_CHARGED_MEMBERS));
}

/**
 * A request every member of the room is told of that makes the relay send more (an unmute, a
 * publication, an output started, a cleared board): a message of the member's budget and
 * {@link chargeBroadcast}, refused while the fan-out budget is in debt. Without it, a toggle sent
 * at the frame rate would make the relay write hundreds of thousands of frames a second.
 */
export function spendBroadcast(scope: RequestScope, events = 1): void {
  if (!scope.member.fanout.hasCredit()) throw new RelayError('RATE_LIMITED', 'what you sent recently is still being delivered to many members: slow down', 'fanout-rate');
  spend(scope);
  chargeBroadcast(scope, events);
}

/** Spend `n` bytes of the member's data-byte budget (and a message): over it, `RATE_LIMITED`. */
export function spendBytes(scope: RequestScope, n: number): void {
  spend(scope);
  if (!scope.bytes.take(n)) {
    scope.flooding();
    const { dataByteRate, dataByteBurst } = scope.relay.config;
    throw new RelayError('RATE_LIMITED', `at most ${dataByteRate} bytes of data per second (burst ${dataByteBurst})`, 'byte-rate');
  }
  // a domain-wide token's members share their project's part, however many they are
  if (scope.member.domainWide && !scope.relay.budgets.domain(scope.member.project).bytes.take(n)) {
    scope.flooding();
    throw new RelayError('RATE_LIMITED', `members of this project's domain-wide tokens together send at most ${scope.relay.config.domainDataByteRate} bytes of data per second`, 'byte-rate');
  }
}

/**
 * A result already serialised, spliced into the response as is: what the relay keeps as bytes
 * (pubsub history) is answered without being parsed and encoded again.
 */
export class Serialized<T> {
  declare readonly result?: T;
  constructor(readonly json: Buffer) {}
}
