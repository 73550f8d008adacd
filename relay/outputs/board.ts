import { OUTPUTS, type OutputInfo, type OutputName, type OutputOptions, type OutputStatus, type OutputStatuses, type OutputChange } from '../../src/protocol/control.ts';
import type { ServerFrame, WireError } from '../../src/protocol/messages.ts';
import { RelayError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Timeline } from '../rooms/timeline.ts';
import type { TrackTap } from '../media/board.ts';
import type { Member } from '../rooms/member.ts';
import type { EffectiveGrant } from '../../src/protocol/grant.ts';
import { DEFAULTS } from '../config.ts';
import { OutputStarts } from './output-starts.ts';

/** What an output provider may use. */
export interface OutputContext {
  /** The project of the room: storage is namespaced by it. */
  readonly project: string;
  readonly roomId: string;
  readonly timeline: Timeline;
  /** The display name of a participant (its id when it is not in the room). */
  nameOf(participantId: string): string;
  readonly log: Logger;
  /** Send a frame to everyone in the room (`optional`: skipped for members not keeping up). */
  broadcast(frame: ServerFrame, optional?: boolean): void;
  /**
   * The same for a frame that may wait for company: in a crowded room it rides with each
   * member's next frame, or goes out on its own within 50 ms (as arrivals and departures do).
   */
  broadcastLazy(frame: ServerFrame): void;
  /** The same, for a frame already serialised. */
  broadcastRaw(data: Buffer, optional?: boolean): void;
  /** Send `full` to the members `sees` picks, `reduced` (if any) to the others. */
  broadcastSplit(full: ServerFrame, reduced: ServerFrame | null, sees: (member: Member) => boolean): void;
  /** The room's published tracks, now and later. */
  tapMedia(tap: TrackTap): () => void;
  /** Told of every change after the members (webhooks). */
  changed?(change: OutputChange): void;
}

/**
 * A running output. `start` resolves once it produces (with where to find its product),
 * or rejects with a `RelayError`; `stop` ends it (with what it left, e.g. a recording's files,
 * which the `stopped` status carries). An output that fails on its own calls `failed` from its
 * context.
 */
export interface OutputProvider<O extends OutputName = OutputName> {
  /** `options` as the protocol's parser let them through; absent when the caller gave none. */
  start(options: OutputOptions[O] | undefined): Promise<OutputInfo[O] | void>;
  stop(): Promise<OutputInfo[O] | void>;
  /**
   * The room is gone (after `stop`, if it ran): let go of what only the room's life kept (the
   * last HLS run, which its audience could watch again until then). Called on the room's last
   * provider of each output.
   */
  roomEnded?(): Promise<void>;
}

/** Makes the provider of an output for a room; `failed` reports a failure after start. */
export type ProviderFactory<O extends OutputName = OutputName> = (ctx: OutputContext, failed: (error: WireError) => void) => OutputProvider<O>;

/** What the board keeps of a running provider. */
type Running = Pick<OutputProvider, 'stop'>;

/** The provider factory of every output. */
export type ProviderFactories = { readonly [O in OutputName]: ProviderFactory<O> };

/** How an output board runs its providers. */
export interface OutputBoardOptions {
  /** The longest a provider's `start` may take before the output is `failed` (ms). */
  startTimeoutMs?: number;
  /**
   * The relay's budgets of starts of each output of each room (`RATE_LIMITED`, `output-rate`):
   * each start of a media output runs ffmpeg and makes a directory, so a start and stop in a loop
   * would cost the relay a process and the disk a directory every few milliseconds.
   */
  starts?: OutputStarts;
}

/**
 * Who may see where an output's product is (its `info`). The HLS URL is the stream itself
 * (whoever holds it may watch), so it reaches only members allowed to follow the room's media
 * (`canSubscribe`) or to run HLS (`canHls`); the others see the state without it.
 */
function seesInfo(output: OutputName, grant: EffectiveGrant): boolean {
  return output !== 'hls' || grant.canSubscribe || grant.canHls;
}

/** A status without its `info`. */
function withoutInfo<O extends OutputName>(status: OutputStatus<O>): OutputStatus<O> {
  const { info: _info, ...rest } = status;
  return rest;
}

/**
 * The five outputs of one room and their state machines:
 * stopped → starting → active → stopping → stopped, and → failed from starting or active.
 * A start that takes longer than the deadline fails (`TIMEOUT`, `start-timeout`) and its
 * provider is stopped; a stop while starting cancels the start. Every change goes to everyone
 * as `output-changed` (the HLS URL only to those who may see it).
 */
export class OutputBoard {
  private readonly status: OutputStatuses;
  /** How each active output was started: what it is started with again elsewhere. */
  private readonly startedWith = new Map<OutputName, { by: string; options: unknown }>();
  private readonly running = new Map<OutputName, Running>();
  /** The last provider made for each output, running or not (told when the room ends). */
  private readonly last = new Map<OutputName, OutputProvider>();
  private disposed = false;
  /** Ends the start in progress of an output with an error (its stop, or its deadline). */
  private readonly cancels = new Map<OutputName, (error: RelayError) => void>();
  private readonly startTimeoutMs: number;
  private readonly starts: OutputStarts;

  constructor(
    private readonly ctx: OutputContext,
    private readonly factories: ProviderFactories,
    options: OutputBoardOptions = {},
  ) {
    this.startTimeoutMs = options.startTimeoutMs ?? DEFAULTS.outputStartTimeoutMs;
    this.starts = options.starts ?? new OutputStarts(DEFAULTS.outputStarts);
    this.status = { recording: { state: 'stopped' }, hls: { state: 'stopped' }, livestream: { state: 'stopped' }, transcription: { state: 'stopped' }, whiteboard: { state: 'stopped' } };
  }

  /** The outputs that are active, with who started them and how (a cluster keeps them to start them again on the room's next home). */
  active(): Array<{ output: OutputName; by: string; options: unknown }> {
    return [...this.startedWith].map(([output, { by, options }]) => ({ output, by, options }));
  }

  /** The state of every output, as `grant` may see it (without a grant: everything). */
  statuses(grant?: EffectiveGrant): OutputStatuses {
    const out = { ...this.status };
    if (grant && !seesInfo('hls', grant) && out.hls.info) out.hls = withoutInfo(out.hls);
    return out;
  }

  /** The provider of an active output (e.g. the whiteboard's board). */
  provider(output: OutputName): Running | undefined {
    return this.status[output].state === 'active' ? this.running.get(output) : undefined;
  }

  async start<O extends OutputName>(output: O, by: string, options: OutputOptions[O] | undefined): Promise<OutputStatus<O>> {
    // a provider started after the room's end would run (an encoder) with nothing left to stop it
    if (this.disposed) throw new RelayError('ROOM_ENDED', 'the room has ended', 'room-ended');
    const { state } = this.status[output];
    if (state !== 'stopped' && state !== 'failed') {
      throw new RelayError('INVALID_STATE', `${output} is already ${state}`, 'output-already-active');
    }
    if (!this.starts.take(this.ctx.project, this.ctx.roomId, output)) {
      throw new RelayError('RATE_LIMITED', `${output} was started ${this.starts.perMinute} times within a minute in this room: try again later`, 'output-rate');
    }
    const before = this.status[output];
    this.set(output, { state: 'starting', by });
    const factory: ProviderFactory<O> = this.factories[output];
    const provider: OutputProvider<O> = factory(this.ctx, (error) => this.fail(output, provider, error));
    this.running.set(output, provider);
    this.last.set(output, provider as unknown as OutputProvider);
    let timer: NodeJS.Timeout | undefined;
    let cancel: ((error: RelayError) => void) | undefined;
    let timedOut = false;
    const cut = new Promise<never>((_, reject) => {
      cancel = reject;
      this.cancels.set(output, reject);
      timer = setTimeout(() => {
        timedOut = true;
        reject(new RelayError('TIMEOUT', `${output} did not start within ${this.startTimeoutMs} ms`, 'start-timeout'));
      }, this.startTimeoutMs);
    });
    const started = Promise.resolve().then(() => provider.start(options));
    // a start that ends after its deadline or its cancellation: whatever it built is let go
    started.then(
      () => {
        if (this.running.get(output) !== provider) void this.stopProvider(output, provider);
      },
      () => {},
    );
    try {
      const info = await Promise.race([started, cut]);
      if (this.running.get(output) !== provider) throw new RelayError('INVALID_STATE', `${output} was stopped while starting`, 'output-stopped');
      this.startedWith.set(output, { by, options });
      this.set<O>(output, { state: 'active', by, ...(info ? { info } : {}) });
      return this.status[output];
    } catch (err) {
      if (!(err instanceof RelayError)) this.ctx.log.warn('output could not start', { project: this.ctx.project, room: this.ctx.roomId, output, detail: (err as Error)?.message });
      const error: WireError = err instanceof RelayError ? err.toWire() : { code: 'INTERNAL_ERROR', kind: 'Network', message: `${output} could not start`, reason: 'provider-failed' };
      if (this.running.get(output) === provider) {
        this.running.delete(output);
        if (timedOut) void this.stopProvider(output, provider);
        // the caller's mistake (a bad URL, a private target, a language there is no model for)
        // is the caller's answer: the room's output goes back to what it was, not `failed` for all
        if (error.code === 'INVALID_ARGUMENT') this.set(output, before);
        else this.set(output, { state: 'failed', by, error });
      }
      throw new RelayError(error.code, error.message, error.reason);
    } finally {
      clearTimeout(timer);
      if (this.cancels.get(output) === cancel) this.cancels.delete(output);
    }
  }

  /** Stop an active output, or cancel one that is starting (its `start` is answered `output-stopped`). */
  async stop<O extends OutputName>(output: O, by: string): Promise<OutputStatus<O>> {
    const provider = this.running.get(output);
    const { state } = this.status[output];
    if (!provider || (state !== 'active' && state !== 'starting')) {
      throw new RelayError('INVALID_STATE', `${output} is ${state}, not active`, 'output-not-active');
    }
    this.running.delete(output);
    this.cancels.get(output)?.(new RelayError('INVALID_STATE', `${output} was stopped while starting`, 'output-stopped'));
    this.set(output, { state: 'stopping', by });
    const info = (await this.stopProvider(output, provider)) as OutputInfo[O] | undefined;
    this.set<O>(output, { state: 'stopped', by, ...(info ? { info } : {}) });
    return this.status[output];
  }

  /** Stop everything (the room is gone); no member is told, nobody is left, only `changed` hears of each stop. */
  async dispose(): Promise<void> {
    this.disposed = true;
    const running = [...this.running];
    this.running.clear();
    for (const cancel of this.cancels.values()) cancel(new RelayError('INVALID_STATE', 'the room ended', 'output-stopped'));
    await Promise.allSettled(
      running.map(async ([output, provider]) => {
        await this.stopProvider(output, provider);
        this.ctx.changed?.({ output, state: 'stopped' } as OutputChange);
      }),
    );
    const last = [...this.last.values()];
    this.last.clear();
    await Promise.allSettled(last.map((provider) => provider.roomEnded?.()));
  }

  /**
   * Stop a provider under the same deadline as its start: a provider that cannot stop is let
   * go (and logged), and the output is stopped all the same.
   */
  private async stopProvider(output: OutputName, provider: Running): Promise<OutputInfo[OutputName] | void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        Promise.resolve().then(() => provider.stop()),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('stop timed out')), this.startTimeoutMs))),
      ]);
    } catch (err) {
      this.ctx.log.warn('output did not stop cleanly', { project: this.ctx.project, room: this.ctx.roomId, output, detail: (err as Error).message });
    } finally {
      clearTimeout(timer);
    }
  }

  private fail(output: OutputName, provider: Running, error: WireError): void {
    if (this.running.get(output) !== provider) return;
    this.running.delete(output);
    // failing while starting: the start is answered with this error
    this.cancels.get(output)?.(new RelayError(error.code, error.message, error.reason));
    void this.stopProvider(output, provider);
    this.ctx.log.warn('output failed', { project: this.ctx.project, room: this.ctx.roomId, output, code: error.code, reason: error.reason, detail: error.message });
    this.set(output, { state: 'failed', error, ...(this.status[output].by ? { by: this.status[output].by } : {}) });
  }

  private set<O extends OutputName>(output: O, status: OutputStatus<O>): void {
    (this.status as Record<O, OutputStatus<O>>)[output] = status;
    if (status.state !== 'active') this.startedWith.delete(output);
    this.ctx.timeline.emit({ type: 'output', output, state: status.state, ...(status.by ? { by: status.by } : {}) });
    // one status of one output: the correlation of `output` and `info` that the type of the event expresses
    const frame = (s: OutputStatus<O>): ServerFrame => ({ type: 'event', name: 'output-changed', data: { output, ...s } as OutputChange });
    if (status.info && output === 'hls') this.ctx.broadcastSplit(frame(status), frame(withoutInfo(status)), (member) => seesInfo(output, member.grant));
    // a status change of an output is no one's cue to act within 50 ms: written on its own, it
    // was a thousand more writes in a large room, in front of its next chat line
    else this.ctx.broadcastLazy(frame(status));
    this.ctx.changed?.({ output, ...status } as OutputChange);
  }
}
