import type { ParticipantCounts } from '../../src/protocol/messages.ts';

/**
 * Coalesces count changes of one room: at most one publication per window, only when a value
 * changed, and the settled value published within one window of the last change. A burst of
 * 10,000 joins costs one timer and one publication per window, whatever the audience size.
 */
export class CountCoalescer {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private lastSentAt = -Infinity;
  private sent: ParticipantCounts;
  private disposed = false;

  constructor(
    private readonly windowMs: number,
    private readonly read: () => ParticipantCounts,
    private readonly publish: (counts: ParticipantCounts) => void,
  ) {
    this.sent = read();
  }

  /** Note that the counts may have changed. */
  changed(): void {
    if (this.timer || this.disposed) return;
    const delay = Math.max(0, this.lastSentAt + this.windowMs - Date.now());
    this.timer = setTimeout(() => this.flush(), delay);
  }

  private flush(): void {
    this.timer = null;
    const counts = this.read();
    const sent = this.sent;
    if (counts.speaker === sent.speaker && counts.viewer === sent.viewer) return;
    this.sent = counts;
    this.lastSentAt = Date.now();
    this.publish(counts);
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
