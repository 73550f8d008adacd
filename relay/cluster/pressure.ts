/**
 * Stream pressure at a member's node: a stream's chunks for a connection here that fill it past
 * the high-water mark are reported to its room's home, again at each further {@link REPORT_STEP}
 * it fills, and when it has drained, so that the home holds the stream back for that member, and
 * drops it from streams before its unsent data nears the slow-consumer cut, as for one of its
 * own, instead of this node cutting it (streams aimed at a member that does not read, or reads
 * slowly, would otherwise get it cut: eight streams each a window ahead pass 8 MiB before the
 * home's one-second rule drops it).
 */
import type { MemberConnection } from '../seam.ts';

/** How often connections reported full are looked at again (ms). */
const PRESSURE_CHECK_MS = 100;
/** A full connection's unsent bytes are reported again each time they grow by this much. */
export const REPORT_STEP = 1024 * 1024;

/** A connection here of a room homed elsewhere. */
export interface PressuredEdge {
  readonly conn: MemberConnection;
  /** The node its room is homed on. */
  readonly home: string;
}

/** The connections of this node that a stream filled, until they drain. */
export class PressureWatch {
  /** The connections reported full, with the bytes last reported. */
  private readonly full = new Map<string, { edge: PressuredEdge; reported: number }>();
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
    const bytes = edge.conn.bufferedAmount;
    const known = this.full.get(link);
    if (known) {
      if (known.edge === edge && bytes >= known.reported + REPORT_STEP) {
        known.reported = bytes;
        this.report(edge.home, link, bytes);
      }
      return;
    }
    if (bytes <= this.highWater) return;
    this.full.set(link, { edge, reported: bytes });
    this.report(edge.home, link, bytes);
    this.timer ??= setInterval(() => this.recheck(), PRESSURE_CHECK_MS);
    this.timer.unref();
  }

  private recheck(): void {
    for (const [link, { edge }] of this.full) {
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
