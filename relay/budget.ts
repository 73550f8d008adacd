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

/** The relay-wide ceilings, shared by every room. */
export interface RelayBudgets {
  /** Bytes of persisted pubsub history. */
  readonly history: Budget;
  /** Bytes of whiteboard shapes. */
  readonly whiteboard: Budget;
  /** Topic subscriptions. */
  readonly subscriptions: Budget;
  /** Joiners waiting in lobbies. */
  readonly lobby: Budget;
  /** Bytes of inbound frames held back by frame budgets. */
  readonly held: Budget;
}

export function relayBudgets(config: { historyBytesTotal: number; whiteboardBytesTotal: number; maxSubscriptionsTotal: number; maxLobbyTotal: number; maxHeldTotal: number }): RelayBudgets {
  return {
    held: new Budget(config.maxHeldTotal),
    history: new Budget(config.historyBytesTotal),
    whiteboard: new Budget(config.whiteboardBytesTotal),
    subscriptions: new Budget(config.maxSubscriptionsTotal),
    lobby: new Budget(config.maxLobbyTotal),
  };
}
