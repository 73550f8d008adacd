/**
 * Stream pressure at a member's node: a stream's chunks for a connection here that fill it past
 * the high-water mark are reported to its room's home (once), and reported again when it has
 * drained, so that the home holds the stream back for that member as for one of its own, instead
 * of this node cutting it as a slow consumer (a stream aimed at a member that does not read would
 * otherwise get it cut).
 */
import type { MemberConnection } from '../seam.ts';

/** How often connections reported full are looked at again (ms). */
const PRESSURE_CHECK_MS = 100;

/** A connection here of a room homed elsewhere. */
export interface PressuredEdge {
  readonly conn: MemberConnection;
  /** The node its room is homed on. */
  readonly home: string;
}

/** The connections of this node that a stream filled, until they drain. */
export class PressureWatch {
  private readonly full = new Map<string, PressuredEdge>();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly highWater: number,
    /** Tell `home` how many bytes the link's connection holds (0: drained). */
    private readonly report: (home: string, link: string, bytes: number) => void,
    /** The edge of a link now, if it is still here. */
    private readonly edgeOf: (link: string) => PressuredEdge | undefined,
  ) {}

  /** A chunk went to `edge`'s connection: report it if that filled it. */
  check(link: string, edge: PressuredEdge): void {
    if (this.full.has(link) || edge.conn.bufferedAmount <= this.highWater) return;
    this.full.set(link, edge);
    this.report(edge.home, link, edge.conn.bufferedAmount);
    this.timer ??= setInterval(() => this.recheck(), PRESSURE_CHECK_MS);
    this.timer.unref();
  }

  private recheck(): void {
    for (const [link, edge] of this.full) {
      const still = this.edgeOf(link) === edge;
      if (still && edge.conn.bufferedAmount > this.highWater) continue;
      this.full.delete(link);
      if (still) this.report(edge.home, link, 0);
    }
    if (this.full.size === 0) this.stop();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
