import { OUTPUTS, type OutputName, type OutputState, type OutputStatus } from '../../src/protocol/control.ts';
import type { ServerFrame, WireError } from '../../src/protocol/messages.ts';
import { RelayError } from '../context.ts';
import type { Logger } from '../log.ts';
import type { Timeline } from '../rooms/timeline.ts';
import type { TrackTap } from '../media/board.ts';

/** What an output provider may use. */
export interface OutputContext {
  readonly roomId: string;
  readonly timeline: Timeline;
  readonly log: Logger;
  /** Send a frame to everyone in the room. */
  broadcast(frame: ServerFrame): void;
  /** The room's published tracks, now and later. */
  tapMedia(tap: TrackTap): () => void;
}

/**
 * A running output. `start` resolves once it produces (with where to find its product),
 * or rejects with a `RelayError`; `stop` ends it. An output that fails on its own calls
 * `failed` from its context.
 */
export interface OutputProvider {
  start(options: Record<string, unknown>): Promise<Record<string, string> | void>;
  stop(): Promise<void>;
}

/** Makes the provider of an output for a room; `failed` reports a failure after start. */
export type ProviderFactory = (ctx: OutputContext, failed: (error: WireError) => void) => OutputProvider;

/**
 * The five outputs of one room and their state machines:
 * stopped → starting → active → stopping → stopped, and → failed from starting or active.
 * Every change goes to everyone as `output-changed`.
 */
export class OutputBoard {
  private readonly status = {} as Record<OutputName, OutputStatus>;
  private readonly running = new Map<OutputName, OutputProvider>();

  constructor(
    private readonly ctx: OutputContext,
    private readonly factories: Readonly<Record<OutputName, ProviderFactory>>,
  ) {
    for (const output of OUTPUTS) this.status[output] = { state: 'stopped' };
  }

  statuses(): Record<OutputName, OutputStatus> {
    return { ...this.status };
  }

  /** The provider of an active output (e.g. the whiteboard's board). */
  provider(output: OutputName): OutputProvider | undefined {
    return this.status[output].state === 'active' ? this.running.get(output) : undefined;
  }

  async start(output: OutputName, by: string, options: Record<string, unknown>): Promise<OutputStatus> {
    const { state } = this.status[output];
    if (state !== 'stopped' && state !== 'failed') {
      throw new RelayError('INVALID_ARGUMENT', `${output} is already ${state}`, 'output-already-active');
    }
    this.set(output, { state: 'starting', by });
    const provider = this.factories[output](this.ctx, (error) => this.fail(output, provider, error));
    this.running.set(output, provider);
    try {
      const info = await provider.start(options);
      if (this.running.get(output) !== provider) throw new RelayError('INVALID_ARGUMENT', `${output} was stopped while starting`, 'output-stopped');
      this.set(output, { state: 'active', by, ...(info ? { info } : {}) });
      return this.status[output];
    } catch (err) {
      const error: WireError = err instanceof RelayError ? err.toWire() : { code: 'CONNECTION_FAILED', message: `${output} could not start: ${(err as Error).message}`, reason: 'provider-failed' };
      if (this.running.get(output) === provider) {
        this.running.delete(output);
        this.set(output, { state: 'failed', by, error });
      }
      throw new RelayError(error.code, error.message, error.reason);
    }
  }

  async stop(output: OutputName, by: string): Promise<OutputStatus> {
    const provider = this.running.get(output);
    const { state } = this.status[output];
    if (!provider || state !== 'active') throw new RelayError('INVALID_ARGUMENT', `${output} is ${state}, not active`, 'output-not-active');
    this.set(output, { state: 'stopping', by });
    try {
      await provider.stop();
    } finally {
      this.running.delete(output);
      this.set(output, { state: 'stopped', by });
    }
    return this.status[output];
  }

  /** Stop everything (the room is gone); nobody is told, nobody is left. */
  async dispose(): Promise<void> {
    const running = [...this.running.values()];
    this.running.clear();
    await Promise.allSettled(running.map((p) => p.stop()));
  }

  private fail(output: OutputName, provider: OutputProvider, error: WireError): void {
    if (this.running.get(output) !== provider) return;
    this.running.delete(output);
    void provider.stop().catch(() => undefined);
    this.ctx.log.warn(`room ${this.ctx.roomId}: ${output} failed: ${error.message}`);
    this.set(output, { state: 'failed', error, ...(this.status[output].by ? { by: this.status[output].by } : {}) });
  }

  private set(output: OutputName, status: OutputStatus & { state: OutputState }): void {
    this.status[output] = status;
    this.ctx.timeline.emit({ type: 'output', output, state: status.state, ...(status.by ? { by: status.by } : {}) });
    this.ctx.broadcast({ type: 'event', name: 'output-changed', data: { output, ...status } });
  }
}
