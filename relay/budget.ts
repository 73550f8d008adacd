import { PresenceBudgets, type PresenceLimits } from './rooms/presence.ts';
import { UnfinishedBudget } from './unfinished.ts';
import { OutputStarts } from './outputs/output-starts.ts';
import { SharedRate } from './data/shared-rate.ts';
import { BucketMap } from './data/bucket-map.ts';
import { ByteArena } from './data/byte-arena.ts';
import { TokenBucket } from './data/token-bucket.ts';

/**
 * A quantity the relay holds on someone's behalf (bytes of history, subscriptions, lobby
 * seats...), with a ceiling. Budgets nest: a room's history budget charges the relay's too, so
 * every per-member and per-room limit also adds up to a relay-wide one.
 */
export class Budget {
  private used = 0;

  constructor(
    readonly limit: number,
    private readonly parent: Budget | null = null,
  ) {}

  get inUse(): number {
    return this.used;
  }

  /** Whether `n` more fits here and in every budget above. */
  fits(n: number): boolean {
    return this.used + n <= this.limit && (this.parent?.fits(n) ?? true);
  }

  /** Take `n` if it fits everywhere; false (taking nothing) if not. */
  take(n: number): boolean {
    if (!this.fits(n)) return false;
    this.charge(n);
    return true;
  }

  /** Give back `n` taken earlier. */
  give(n: number): void {
    this.used -= n;
    this.parent?.give(n);
  }

  private charge(n: number): void {
    this.used += n;
    this.parent?.charge(n);
  }
}

/**
 * What the members of one project's domain-wide tokens (and the rooms such tokens opened) may
 * hold, inside the relay-wide ceilings: a leaked audience token fills its own project's part,
 * never the pools every project's rooms draw from.
 */
export interface DomainBudgets {
  /** Bytes of history of the rooms that domain-wide tokens opened. */
  readonly history: Budget;
  /** Topic subscriptions of members that joined with a domain-wide token. */
  readonly subscriptions: Budget;
  /** Recipients named by open data streams of members that joined with a domain-wide token: half of the relay's. */
  readonly streamRecipients: Budget;
  /** Joiners with a domain-wide token waiting in lobbies. */
  readonly lobby: Budget;
  /**
   * Data bytes a second (pubsub payloads, shapes, answers: what each member's data budget
   * counts) of all members that joined with a domain-wide token: however many connections a
   * shared audience token has, or however many such tokens leaked, together they have this.
   */
  readonly bytes: TokenBucket;
  /** Text bytes a second those members' connections are read and parsed at, together (the same rate). */
  readonly text: SharedRate;
}

/**
 * Turns a second of a project's shared text rate, at most: one connection of its domain-wide
 * crowd is read for up to 1/32 s of the rate at a time (512 KiB at the default 16 MiB/s).
 */
const TURNS_A_SECOND = 32;

/** The relay-wide ceilings, shared by every room. */
export interface RelayBudgets {
  /** Bytes of persisted pubsub history. */
  readonly history: Budget;
  /** The memory pubsub history and whiteboard shapes are kept in (blocks the relay reuses; see `data/byte-arena.ts`). */
  readonly arena: ByteArena;
  /** Bytes of whiteboard shapes. */
  readonly whiteboard: Budget;
  /** Bytes of identities reserved by pinned tokens, in all rooms. */
  readonly reservedIds: Budget;
  /** A project's part of {@link reservedIds}: one project's rooms cannot take every other's. */
  reservedIdsOf(project: string): Budget;
  /** Topic subscriptions. */
  readonly subscriptions: Budget;
  /** Recipients named (`to`) by open data streams. */
  readonly streamRecipients: Budget;
  /** Joiners waiting in lobbies. */
  readonly lobby: Budget;
  /** Bytes of inbound frames held back by frame budgets. */
  readonly held: Budget;
  /** Bytes of inbound messages still arriving (held by ws), per token and in all. */
  readonly unfinished: UnfinishedBudget;
  /** The part of `project`'s domain-wide tokens (made on first use; projects are the keys file's, few). */
  domain(project: string): DomainBudgets;
  /** Per token: the arrival and departure events its on-stage members make the relay send. */
  readonly presence: PresenceBudgets;
  /** Per room and output: its starts a minute (kept when the room empties and is made again). */
  readonly outputStarts: OutputStarts;
  /**
   * Per token (`project\0tokenKey`): the bytes of its listings of recordings, at the member
   * data-byte rate (a listing is JSON made from a directory walk, free to ask for in a loop
   * otherwise).
   */
  readonly listings: BucketMap;
  /**
   * Per token (`project\0tokenKey`): its lobby requests that ended unadmitted (went away, timed
   * out, replaced; a denial has its own cooldown). Each request and its end are events to the room's moderators and its
   * webhooks: a knock-and-leave loop of the cheapest ask token sent a moderator 5,800 frames a
   * second until it was cut, and pushed the room's own events out of the webhook queue. A token
   * in debt may not knock ({@link LOBBY_CHURN_RATE} a second once {@link LOBBY_CHURN_BURST} are spent).
   */
  readonly lobbyChurn: BucketMap;
}

/** Unadmitted lobby requests a token may make a second, on average. */
export const LOBBY_CHURN_RATE = 2;
/** ...and at once: a shared ask token's crowd whose members leave while waiting is not refused for the first. */
export const LOBBY_CHURN_BURST = 20;

/** The limits of {@link relayBudgets}: the relay's configuration has them. */
export interface BudgetLimits extends PresenceLimits {
  historyBytesTotal: number;
  whiteboardBytesTotal: number;
  reservedIdsBytesTotal: number;
  reservedIdsBytesPerProject: number;
  maxSubscriptionsTotal: number;
  maxStreamRecipientsTotal: number;
  maxLobbyTotal: number;
  maxHeldTotal: number;
  unfinishedPerToken: number;
  maxUnfinishedTotal: number;
  domainHistoryBytes: number;
  domainSubscriptions: number;
  domainLobby: number;
  domainDataByteRate: number;
  outputStarts: number;
  dataByteRate: number;
  dataByteBurst: number;
}

export function relayBudgets(config: BudgetLimits): RelayBudgets {
  const history = new Budget(config.historyBytesTotal);
  const subscriptions = new Budget(config.maxSubscriptionsTotal);
  const lobby = new Budget(config.maxLobbyTotal);
  const domains = new Map<string, DomainBudgets>();
  const reservedIds = new Budget(config.reservedIdsBytesTotal);
  const reservedByProject = new Map<string, Budget>();
  const streamRecipients = new Budget(config.maxStreamRecipientsTotal);
  return {
    held: new Budget(config.maxHeldTotal),
    unfinished: new UnfinishedBudget(config.unfinishedPerToken, config.maxUnfinishedTotal),
    presence: new PresenceBudgets(config),
    outputStarts: new OutputStarts(config.outputStarts),
    listings: new BucketMap(() => new TokenBucket(config.dataByteRate, config.dataByteBurst)),
    lobbyChurn: new BucketMap(() => new TokenBucket(LOBBY_CHURN_RATE, LOBBY_CHURN_BURST)),
    history,
    arena: new ByteArena(),
    whiteboard: new Budget(config.whiteboardBytesTotal),
    reservedIds,
    reservedIdsOf(project) {
      let part = reservedByProject.get(project);
      if (!part) reservedByProject.set(project, (part = new Budget(config.reservedIdsBytesPerProject, reservedIds)));
      return part;
    },
    subscriptions,
    streamRecipients,
    lobby,
    domain(project) {
      let part = domains.get(project);
      if (!part) {
        part = {
          history: new Budget(config.domainHistoryBytes, history),
          subscriptions: new Budget(config.domainSubscriptions, subscriptions),
          streamRecipients: new Budget(Math.floor(config.maxStreamRecipientsTotal / 2), streamRecipients),
          lobby: new Budget(config.domainLobby, lobby),
          bytes: new TokenBucket(config.domainDataByteRate, 2 * config.domainDataByteRate),
          text: new SharedRate(config.domainDataByteRate, 2 * config.domainDataByteRate, undefined, config.domainDataByteRate / TURNS_A_SECOND),
        };
        domains.set(project, part);
      }
      return part;
    },
  };
}
