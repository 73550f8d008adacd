/**
 * Who may run a speech recogniser now. Each one is an ffmpeg decoding a microphone and, for the
 * local engine, pocketsphinx (about a sixth of a core while it listens, and 0.4 s of CPU to load
 * its model at every start). So recognisers are capped per room, per project and per relay (on a
 * relay of several projects one project, e.g. through a leaked domain-wide token with
 * `canTranscribe` in many rooms, takes at most half of the relay's: the other projects'
 * microphones keep the rest; a relay of one project has all of them for it), and starts are
 * paced: per participant (one member republishing a microphone in a loop starts at most one
 * recogniser per `participantSpacingMs`) and relay-wide (a bucket of `perRelay` starts that
 * refills one per `relayStartEveryMs`). Microphones over a cap wait, first come first served,
 * and start when a place frees.
 */

/** The caps of a {@link RecogniserPool}. */
export interface RecogniserLimits {
  /** Recognisers one room runs at once. */
  perRoom: number;
  /** Recognisers one project runs at once, all its rooms together, while the relay serves more than one project. */
  perProject: number;
  /** Recognisers the relay runs at once, all rooms together. */
  perRelay: number;
  /** Least time between two starts for one participant of a room (ms). */
  participantSpacingMs: number;
  /** The relay-wide start bucket refills one start per this (ms); it holds `perRelay`. */
  relayStartEveryMs: number;
}

/** The defaults: sized for a small machine (two cores run eight recognisers with room to spare). */
export const RECOGNISER_LIMITS: RecogniserLimits = Object.freeze({ perRoom: 4, perProject: 4, perRelay: 8, participantSpacingMs: 3000, relayStartEveryMs: 1000 });

/** Time, for tests to replace. */
export interface PoolClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

const REAL_CLOCK: PoolClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout),
};

/** Whose microphone asks for a recogniser. */
export interface RecogniserPlace {
  project: string;
  /** The room (unique across projects). */
  room: string;
  participant: string;
}

interface Waiter extends RecogniserPlace {
  granted(release: () => void): void;
}

export class RecogniserPool {
  private readonly waiting: Waiter[] = [];
  private readonly perRoom = new Map<string, number>();
  private readonly perProject = new Map<string, number>();
  /** When each participant (room + id) last started one. */
  private readonly lastStart = new Map<string, number>();
  private active = 0;
  private tokens: number;
  private refilledAt: number;
  private timer: unknown = null;

  constructor(
    readonly limits: RecogniserLimits = RECOGNISER_LIMITS,
    private readonly clock: PoolClock = REAL_CLOCK,
    /** How many projects the relay serves now (its keys are reloaded): with one, `perProject` does not apply. */
    private readonly projects: () => number = () => 2,
  ) {
    this.tokens = limits.perRelay;
    this.refilledAt = clock.now();
  }

  /** Recognisers running now. */
  get running(): number {
    return this.active;
  }

  /** Microphones waiting for a place. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Ask for a place for a participant's microphone in a room: `granted` is called (maybe at
   * once) with the function that gives it back. Returns a function that withdraws the request
   * (nothing happens if it was granted: release that instead).
   */
  request({ project, room, participant }: RecogniserPlace, granted: (release: () => void) => void): () => void {
    const waiter: Waiter = { project, room, participant, granted };
    this.waiting.push(waiter);
    this.pump();
    return () => {
      const at = this.waiting.indexOf(waiter);
      if (at >= 0) this.waiting.splice(at, 1);
    };
  }

  private pump(): void {
    const now = this.clock.now();
    const every = this.limits.relayStartEveryMs;
    const refills = Math.floor((now - this.refilledAt) / every);
    if (refills > 0) {
      this.tokens = Math.min(this.limits.perRelay, this.tokens + refills);
      this.refilledAt = this.tokens === this.limits.perRelay ? now : this.refilledAt + refills * every;
    }
    for (const [key, at] of this.lastStart) if (now - at >= this.limits.participantSpacingMs) this.lastStart.delete(key);
    const grants: Waiter[] = [];
    let wake = Infinity;
    const perProject = this.projects() > 1 ? this.limits.perProject : Infinity;
    for (let i = 0; i < this.waiting.length && this.active < this.limits.perRelay; ) {
      const w = this.waiting[i]!;
      const key = `${w.room}\u0000${w.participant}`;
      const last = this.lastStart.get(key);
      if ((this.perRoom.get(w.room) ?? 0) >= this.limits.perRoom || (this.perProject.get(w.project) ?? 0) >= perProject) {
        i++;
        continue;
      }
      if (last !== undefined) {
        wake = Math.min(wake, last + this.limits.participantSpacingMs);
        i++;
        continue;
      }
      if (this.tokens < 1) {
        wake = Math.min(wake, this.refilledAt + every);
        break;
      }
      this.tokens--;
      this.active++;
      this.perRoom.set(w.room, (this.perRoom.get(w.room) ?? 0) + 1);
      this.perProject.set(w.project, (this.perProject.get(w.project) ?? 0) + 1);
      this.lastStart.set(key, now);
      this.waiting.splice(i, 1);
      grants.push(w);
    }
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
    if (wake < Infinity && this.waiting.length > 0) {
      this.timer = this.clock.setTimeout(() => {
        this.timer = null;
        this.pump();
      }, Math.max(1, wake - now));
    }
    for (const w of grants) w.granted(this.releaser(w));
  }

  private releaser({ project, room }: RecogniserPlace): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      lower(this.perRoom, room);
      lower(this.perProject, project);
      this.pump();
    };
  }
}

function lower(counts: Map<string, number>, key: string): void {
  const n = (counts.get(key) ?? 1) - 1;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
