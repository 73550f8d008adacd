import { Fifo } from './fifo.ts';

/** The flow of connections that have not joined yet: one share for all of them. */
export const PRE_AUTH_FLOW = 'pre-auth';
/** The flow of WebSocket upgrades (a join frame does not wait behind a crowd of new sockets). */
export const UPGRADE_FLOW = 'upgrades';

/**
 * Work the scheduler runs in turns: a connection's inbound frames, or a WebSocket upgrade.
 * `queued` belongs to the scheduler.
 */
export interface Turn {
  /** Whose share the work uses. May change between steps (a connection that joins). */
  readonly flow: Flow;
  queued: boolean;
  /** Do one unit of work (one frame); true when there is more to do now. */
  step(): boolean;
}

/** One piece of work in a flow's turn (a WebSocket upgrade, a join timeout). */
export class Task implements Turn {
  queued = false;

  constructor(
    readonly flow: Flow,
    private readonly work: () => void,
  ) {}

  step(): boolean {
    this.work();
    return false;
  }
}

/**
 * One share of the relay: the connections of one token (or every connection that has not
 * joined yet). Its turns wait in order, so its connections take turns among themselves.
 */
export class Flow {
  /** Its waiting turns, oldest first. */
  private readonly turns = new Fifo<Turn>();
  /** Virtual start and finish of its work (start-time fair queuing), valid in `epoch`. */
  start = 0;
  finish = 0;
  epoch = -1;
  /** Its place in the scheduler's heap, -1 when it has nothing waiting. */
  index = -1;
  /** Among flows with the same start, the one that waited longest goes first. */
  order = 0;
  /** Connections using it. */
  users = 0;
  /** When its last work ended, or when it was made (the scheduler's clock). */
  lastActive = -Infinity;

  /**
   * @param weight its share against a flow of weight 1 when both have work waiting
   * @param share if set, the flow is not queued with the others: while it and they have work it
   *   gets this fraction of the scheduler's time however many of them wait (more when its weight
   *   against theirs gives more), and the rest is shared among them by their weights (see
   *   {@link FrameScheduler})
   */
  constructor(
    readonly key: string,
    readonly weight = 1,
    readonly share = 0,
  ) {
    if (!(share >= 0 && share < 1)) throw new RangeError(`a flow's share is a fraction below 1, not ${share}`);
  }

  get waiting(): number {
    return this.turns.length;
  }

  push(turn: Turn): void {
    this.turns.push(turn);
  }

  shift(): Turn | undefined {
    return this.turns.shift();
  }
}

/** Tunables of the scheduler (tests give their own clock). */
export interface SchedulerOptions {
  /** How long the scheduler handles frames before it lets the event loop read sockets and run timers (ms). */
  sliceMs?: number;
  /** How much work, per turn of the event loop, is done at once on arrival while nothing waits (ms). */
  fastMs?: number;
  /**
   * A flow that has been quiet for `quietMs` starts this far behind the others (ms of work): a
   * quiet member's frame goes first. One quiet for longer starts further behind, in proportion,
   * up to `maxCreditMs`.
   */
  creditMs?: number;
  /** The most credit a quiet flow starts with (ms of work). */
  maxCreditMs?: number;
  /** How long a flow must have had nothing to do to count as quiet (ms): one that comes back at once gets no credit. */
  quietMs?: number;
  now?: () => number;
  defer?: (fn: () => void) => void;
}

/**
 * Fairness across tokens. A frame is handled on arrival while nothing waits, up to `fastMs` of
 * work per turn of the event loop (an idle relay answers at once). Past that, or while anything
 * waits, work waits in its flow and the scheduler runs it in slices of `sliceMs`, picking each
 * time the flow that has used the least of the relay (start-time fair queuing over the measured
 * time each frame took): a flow of a hundred connections of one leaked token gets the share of
 * one member, a member that has been quiet is served before any flooder (the longer quiet, the
 * earlier; a frame held to its own budget does not count as quiet), and the time a frame
 * costs (a 64 KiB publish, a refusal, a fan-out to a thousand members) is what is counted, not
 * the number of frames. A flow that comes back after being quiet for a while starts a little
 * ahead; one that comes back at once does not. Within a flow, its connections take turns. Whenever nothing is left
 * waiting, the relay has caught up and the accounts start again from zero.
 *
 * One flow may have a share (the delivery of outbound frames): it is not queued with the others.
 * While it and they have work, it runs whenever it has had less than its share of the time since
 * both had work (a balance, bounded so that neither side then runs more than two slices in a
 * row), however many flows wait, or what
 * its weight gives it against theirs if that is more (against one busy token, weight 8 is 8/9);
 * time a step excuses (copies written or queued for an audience) counts as its time.
 */
export class FrameScheduler {
  private readonly heap: Flow[] = [];
  /** The weights of the flows in the heap, together. */
  private heapWeight = 0;
  /** The flow with a share (the delivery), outside the heap; at most one. */
  private shared: Flow | null = null;
  /**
   * How far the shared flow is behind its share while both it and the heap have work (ms): it
   * runs while this is not negative. Its time takes `1 - share` of itself off, the others' time
   * adds `share` of theirs.
   */
  private balance = 0;
  /**
   * Work the shared flow must do before a quiet member's frame may go ahead of it again (ms): a
   * frame that went first while the shared flow had its turn adds its time over the others' part
   * (nine times it at a 90 % share). So a member's chat line waits for about a millisecond of the
   * delivery at most, never for the whole of what the delivery is owed (two slices), and a crowd
   * of tokens, each back from being quiet or held back by its own byte budget, still cannot take
   * more than the others' part of the time from the shared flow.
   */
  private creditDebt = 0;
  /** Whether the flow {@link pick} returned goes ahead of the shared flow's turn on its credit. */
  private ahead = false;
  /** The most the shared flow can be owed (ms of balance): two slices of its running alone. */
  private cap = Infinity;
  private order = 0;
  private readonly flows = new Map<string, Flow>();
  /** Virtual time: the start of the work last begun. */
  private virtual = 0;
  private epoch = 0;
  private scheduled = false;
  private fastSpent = 0;
  private fastReset = false;
  /** Time within the work running now that is not its flow's (see {@link excuse}). */
  private excused = 0;
  private readonly sliceMs: number;
  private readonly fastMs: number;
  private readonly creditMs: number;
  private readonly maxCreditMs: number;
  private readonly quietMs: number;
  private readonly now: () => number;
  private readonly defer: (fn: () => void) => void;

  constructor(options: SchedulerOptions = {}) {
    this.sliceMs = options.sliceMs ?? 4;
    this.fastMs = options.fastMs ?? 2;
    this.creditMs = options.creditMs ?? 1;
    this.maxCreditMs = options.maxCreditMs ?? 10 * this.creditMs;
    this.quietMs = options.quietMs ?? 50;
    this.now = options.now ?? (() => performance.now());
    this.defer = options.defer ?? ((fn) => void setImmediate(fn));
  }

  /** True while some work waits. */
  get busy(): boolean {
    return this.heap.length > 0 || (this.shared?.waiting ?? 0) > 0;
  }

  /** Flows in use (for tests and metrics). */
  get flowCount(): number {
    return this.flows.size;
  }

  /** The flow of `key`, one more user of it; `weight` and `share` (see {@link Flow}) are set when it is created. */
  join(key: string, weight = 1, share = 0): Flow {
    let flow = this.flows.get(key);
    if (!flow) {
      flow = new Flow(key, weight, share);
      // quiet since it was made, not for ever: a token whose connections send the moment they
      // join (every flood at once, each with a full burst) has no credit to go before the
      // members who were already there and quiet
      flow.lastActive = this.now();
      if (share > 0) {
        if (this.shared && (this.shared.users > 0 || this.shared.waiting > 0)) throw new Error(`one flow may have a share; ${this.shared.key} has it`);
        this.shared = flow;
      }
      this.flows.set(key, flow);
    }
    flow.users++;
    return flow;
  }

  /** One user less; a flow nobody uses is forgotten (its waiting work, if any, still runs). */
  leave(flow: Flow): void {
    if (--flow.users > 0 || this.flows.get(flow.key) !== flow) return;
    // a shared flow nobody uses any more still runs what waits in it (or its turn running now
    // brings back), then goes: see pick()
    this.flows.delete(flow.key);
  }

  /** Whether work arriving now may run at once: nothing waits and this turn of the event loop has time left. */
  get open(): boolean {
    return !this.busy && this.fastSpent < this.fastMs;
  }

  /**
   * Within the work running now, `ms` were spent on someone else's behalf (frames written to
   * an audience at once): not charged to the flow of that work.
   */
  excuse(ms: number): void {
    this.excused += ms;
  }

  /** Run `fn` now as work of `flow` (the caller checked {@link open}); its time is counted. */
  runNow(flow: Flow, fn: () => void): void {
    const t0 = this.now();
    const start = this.startOf(flow, t0 - flow.lastActive);
    this.excused = 0;
    fn();
    const t1 = this.now();
    this.fastSpent += t1 - t0;
    flow.finish = start + Math.max(0, t1 - t0 - this.excused) / flow.weight;
    flow.epoch = this.epoch;
    flow.lastActive = t1;
    if (!this.fastReset) {
      this.fastReset = true;
      this.defer(() => {
        this.fastReset = false;
        this.fastSpent = 0;
        if (!this.busy) this.epoch++;
      });
    }
  }

  /**
   * Run `fn` as work of `flow`: at once while the scheduler is {@link open}, else in the flow's
   * turn. For work a timer starts: a thousand sockets' join timeouts that fall due together then
   * wait their flow's share like frames, instead of running in one go in front of everyone.
   */
  runInTurn(flow: Flow, fn: () => void): void {
    if (this.open) this.runNow(flow, fn);
    else this.enqueue(new Task(flow, fn));
  }

  /** How long `flow` has had nothing to do (ms): what its credit is reckoned from. */
  quietFor(flow: Flow): number {
    return this.now() - flow.lastActive;
  }

  /**
   * Queue a turn in its flow (once). `quietFor`: how long the flow had been quiet when the work
   * arrived, where it then waited elsewhere (see {@link FrameGate}): a frame held to its own budget
   * comes back with 0 (a flooder held to its budget would otherwise come back "quiet" every time
   * and go ahead of the members who really were); one that waited its turn of a rate shared with
   * other tokens keeps the quiet it arrived with (the wait was theirs). Default: quiet until now.
   */
  enqueue(turn: Turn, quietFor?: number): void {
    if (turn.queued) return;
    turn.queued = true;
    const flow = turn.flow;
    flow.push(turn);
    if (flow.index < 0 && flow !== this.shared) {
      const now = this.now();
      flow.start = this.startOf(flow, quietFor ?? now - flow.lastActive);
      flow.epoch = this.epoch;
      this.heapPush(flow);
    }
    if (!this.scheduled) {
      this.scheduled = true;
      this.defer(() => this.run());
    }
  }

  /**
   * Where a flow that gets work starts, having been quiet for `quiet` ms: where it finished, but
   * not before the others' now; or, quiet for at least `quietMs`, a credit behind the others' now
   * (a flooder that comes back at once has none, or flows that send one frame per read would
   * always go before those with a backlog).
   */
  private startOf(flow: Flow, quiet: number): number {
    if (quiet >= this.quietMs) {
      // what it did before it went quiet no longer counts against it: while the delivery and
      // credited flows are served the others' virtual time stands still, and a member's finish
      // from half a second ago put its next chat line behind every flooder. The longer the quiet,
      // the further ahead (a member quiet for seconds goes before a crowd of tokens pacing their
      // frames just over `quietMs` apart). The credit is in the flow's own work: a weighted
      // flow's virtual time runs slower.
      return this.virtual - Math.min(this.maxCreditMs, (this.creditMs * quiet) / this.quietMs) / flow.weight;
    }
    return flow.epoch === this.epoch && flow.finish > this.virtual ? flow.finish : this.virtual;
  }

  /**
   * The shared flow if it has work and is not ahead of its share (or nothing else waits) and no
   * quiet member's credit is waiting, else the flow at the top of the heap; null when nothing waits.
   */
  private pick(): Flow | null {
    if (this.shared !== null && this.shared.users <= 0 && this.shared.waiting === 0) this.shared = null;
    const shared = this.shared !== null && this.shared.waiting > 0 ? this.shared : null;
    if (!shared || this.heap.length === 0) {
      // one side alone: no credit is banked against the other
      this.balance = 0;
      this.creditDebt = 0;
      return shared ?? this.heap[0] ?? null;
    }
    // the shared flow has caught up with its share: nothing of it is owed any more
    if (this.balance < 0) this.creditDebt = 0;
    const top = this.heap[0]!;
    // a member back from being quiet starts behind the others' now (its credit): its frame goes
    // first, ahead of the shared flow too, until it has used that credit, once the last frame
    // that went ahead of the shared flow is paid back
    if (top.start < this.virtual && this.creditDebt <= 0) {
      this.ahead = this.balance >= 0;
      return top;
    }
    return this.balance >= 0 ? shared : top;
  }

  /** How far the balance goes either way (ms). */
  private get bound(): number {
    return 2 * this.sliceMs;
  }

  private run(): void {
    this.scheduled = false;
    const deadline = this.now() + this.sliceMs;
    for (let flow = this.pick(); flow; flow = this.pick()) {
      const ahead = this.ahead;
      this.ahead = false;
      const turn = flow.shift();
      if (!turn) {
        this.heapRemove(flow);
        continue;
      }
      turn.queued = false;
      if (flow !== this.shared && flow.start > this.virtual) this.virtual = flow.start;
      const t0 = this.now();
      this.excused = 0;
      const more = turn.step();
      const t1 = this.now();
      // a connection with more to do waits behind its flow's others
      if (more && turn.flow === flow && !turn.queued) {
        turn.queued = true;
        flow.push(turn);
      }
      if (flow === this.shared) {
        this.creditDebt = Math.max(0, this.creditDebt - (t1 - t0));
        this.spendShared(t1 - t0, 0);
      } else this.spendOthers(flow, t0, t1, ahead);
      if (more && turn.flow !== flow) this.enqueue(turn);
      if (t1 >= deadline) break;
    }
    if (!this.busy) this.epoch++;
    else if (!this.scheduled) {
      this.scheduled = true;
      this.defer(() => this.run());
    }
  }

  /** `ms` of the shared flow's work, and `otherMs` of someone else's: the balance between them, bounded. */
  private spendShared(ms: number, otherMs: number): void {
    const share = this.sharedPart();
    // bounded so that neither side, once owed the most, then runs more than two slices in a row
    this.cap = this.bound * (1 - share);
    this.balance = Math.max(-this.bound * share, Math.min(this.cap, this.balance - ms * (1 - share) + otherMs * share));
  }

  /**
   * The shared flow's part of the time while both sides have work: its share, or what its weight
   * gives it against the flows waiting, if that is more (below 1 while one of them is counted).
   */
  private sharedPart(): number {
    const shared = this.shared;
    return shared ? Math.max(shared.share, shared.weight / (shared.weight + this.heapWeight)) : 0;
  }

  /**
   * A heap flow's step ran from `t0` to `t1`: its virtual time moves by what it used (less what
   * it excused, which was the audience's: the shared flow's), and it goes where that puts it.
   * `ahead`: it went in the shared flow's turn, on its credit, to be paid back before the next may.
   */
  private spendOthers(flow: Flow, t0: number, t1: number, ahead: boolean): void {
    const own = Math.max(0, t1 - t0 - this.excused);
    // the flow is still counted among those waiting: its part is below 1
    const part = this.sharedPart();
    if (ahead && part < 1) this.creditDebt += (own * part) / (1 - part);
    this.spendShared(t1 - t0 - own, own);
    flow.finish = flow.start + own / flow.weight;
    flow.epoch = this.epoch;
    flow.lastActive = t1;
    if (flow.waiting > 0) {
      flow.start = flow.finish;
      this.heapFix(flow);
    } else this.heapRemove(flow);
  }

  // ---- a binary min-heap of flows by virtual start ---------------------------------------

  private less(a: Flow, b: Flow): boolean {
    return a.start < b.start || (a.start === b.start && a.order < b.order);
  }

  private heapPush(flow: Flow): void {
    this.heapWeight += flow.weight;
    flow.order = ++this.order;
    flow.index = this.heap.length;
    this.heap.push(flow);
    this.up(flow.index);
  }

  private heapRemove(flow: Flow): void {
    const i = flow.index;
    if (i < 0) return;
    this.heapWeight -= flow.weight;
    const last = this.heap.pop()!;
    flow.index = -1;
    if (last !== flow) {
      this.heap[i] = last;
      last.index = i;
      this.heapFixAt(i);
    }
  }

  /** The flow was served and has more: behind the others of its start. */
  private heapFix(flow: Flow): void {
    flow.order = ++this.order;
    if (flow.index >= 0) this.heapFixAt(flow.index);
  }

  private heapFixAt(i: number): void {
    if (!this.up(i)) this.down(i);
  }

  private swap(i: number, j: number): void {
    const a = this.heap[i]!;
    const b = this.heap[j]!;
    this.heap[i] = b;
    this.heap[j] = a;
    a.index = j;
    b.index = i;
  }

  private up(i: number): boolean {
    let moved = false;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(this.heap[i]!, this.heap[parent]!)) break;
      this.swap(i, parent);
      i = parent;
      moved = true;
    }
    return moved;
  }

  private down(i: number): void {
    const n = this.heap.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.less(this.heap[l]!, this.heap[m]!)) m = l;
      if (r < n && this.less(this.heap[r]!, this.heap[m]!)) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }
}
