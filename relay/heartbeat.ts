/** What the heartbeat does to one connection: check the answer to the last ping, ping again. */
export interface Beating {
  heartbeat(): void;
}

/** How often the sweep wakes within a period, at most, and the shortest pause between two wakes (ms). */
const MAX_SLICES = 50;
const MIN_TICK_MS = 20;

/**
 * The relay's heartbeat: every connection is pinged once per `periodMs` (and cut if it did not
 * answer the ping before), a slice of them at each of up to fifty wakes per period, not all at
 * once: a ping is a write, and pinging two thousand sockets in one go held the event loop for
 * 50–150 ms every period, delaying every member's frames.
 */
export class HeartbeatSweep {
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly slices: number;
  /** The connections of this period, in the order they are visited, and where the sweep is. */
  private round: Beating[] = [];
  private next = 0;
  private perTick = 0;
  private ticks = 0;

  /**
   * @param onPeriod runs once a period, as a new round starts (pruning what has expired)
   */
  constructor(
    private readonly members: ReadonlySet<Beating>,
    periodMs: number,
    private readonly onPeriod: () => void = () => {},
  ) {
    this.slices = Math.max(1, Math.min(MAX_SLICES, Math.floor(periodMs / MIN_TICK_MS)));
    this.timer = setInterval(() => this.tick(), periodMs / this.slices);
    this.timer.unref();
  }

  /** One wake: the next slice of this period's connections (those still there). */
  tick(): void {
    if (this.ticks++ % this.slices === 0) {
      // a new period: whoever is connected now; one that joins meanwhile waits for the next
      this.round = [...this.members];
      this.next = 0;
      this.perTick = Math.ceil(this.round.length / this.slices);
      this.onPeriod();
    }
    const end = Math.min(this.round.length, this.next + this.perTick);
    for (; this.next < end; this.next++) {
      const member = this.round[this.next]!;
      if (this.members.has(member)) member.heartbeat();
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.round = [];
  }
}
