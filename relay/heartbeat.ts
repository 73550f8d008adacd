/** What the heartbeat does to one connection: check the answer to the last ping, ping again. */
export interface Beating {
  heartbeat(): void;
}

/** How often the sweep wakes within a period, at most, and the shortest pause between two wakes (ms). */
const MAX_SLICES = 50;
const MIN_TICK_MS = 20;

/**
 * The relay's heartbeat: every connection is pinged once per `periodMs` (and cut if it did not
 * answer the ping before), a slice of them at each of up to fifty wakes per period. Each
 * connection keeps the wake it was given when first seen, so two of its pings are always one
 * period apart, whoever joins or leaves meanwhile.
 */
export class HeartbeatSweep {
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly slices: number;
  private readonly slotOf = new WeakMap<Beating, number>();
  private fill = 0;
  private ticks = 0;

  constructor(
    private readonly members: ReadonlySet<Beating>,
    periodMs: number,
    private readonly onPeriod: () => void = () => {},
  ) {
    this.slices = Math.max(1, Math.min(MAX_SLICES, Math.floor(periodMs / MIN_TICK_MS)));
    this.timer = setInterval(() => this.tick(), periodMs / this.slices);
    this.timer.unref();
  }

  /** One wake: the connections whose wake it is (a new one is given the next wake in turn). */
  tick(): void {
    const slot = this.ticks++ % this.slices;
    if (slot === 0) this.onPeriod();
    for (const member of this.members) {
      let mine = this.slotOf.get(member);
      if (mine === undefined) this.slotOf.set(member, (mine = this.fill++ % this.slices));
      if (mine === slot) member.heartbeat();
    }
  }

  /** No more wakes. */
  stop(): void {
    clearInterval(this.timer);
  }
}
