import type { Connection } from '../connection.ts';
import type { OutputInfo, OutputName, OutputOptions, OutputStartParams, OutputState, OutputStatus, Shape, ShapeInput } from '../protocol/control.ts';

/**
 * How long a start or stop may wait for the relay's answer. The relay bounds both itself
 * (`--output-start-timeout`, 15 s by default, and a recording's MP4 is joined within it) and
 * answers with its verdict: the SDK waits longer, so that a slow start (a composite of nine
 * tiles on a busy relay) is not reported as a timeout while the relay still works on it.
 */
const OUTPUT_CALL_MS = 60_000;

/** The arguments of an output's `start`: its options, required where it needs some (the livestream's `url`). */
export type OutputStartArgs<O extends OutputName> = {} extends OutputOptions[O] ? [options?: OutputOptions[O]] : [options: OutputOptions[O]];

/**
 * One room output (recording, HLS, livestream, transcription, whiteboard). `start` and `stop`
 * need the output's own flag (`canRecord`, `canHls`, `canLivestream`, `canTranscribe`,
 * `canWhiteboard`); the relay decides. Every change reaches everyone as `output-changed`.
 *
 * @example
 * ```ts
 * await room.livestream.start({ url: 'rtmp://live.example.com/app/stream-key' });
 * room.on('output-changed', ({ output, state, by }) => badge(output, state, by));
 * await room.recording.start();
 * console.log(room.recording.state, room.recording.info?.url);
 * ```
 */
export class OutputControl<O extends OutputName = OutputName> {
  private current: OutputStatus<O>;

  /** @internal */
  constructor(
    /** Which output. */
    readonly name: O,
    protected readonly connection: Connection,
    initial: OutputStatus<O>,
  ) {
    this.current = initial;
  }

  /** `stopped`, `starting`, `active`, `stopping` or `failed`. */
  get state(): OutputState {
    return this.current.state;
  }

  /** The state with who changed it, the error of a failure, and where to find the product. */
  get status(): OutputStatus<O> {
    return this.current;
  }

  /** Where to find what it produces while active (e.g. `room.hls.info?.playlist`), typed per output. */
  get info(): OutputInfo[O] | undefined {
    return this.current.info;
  }

  /** Start it; resolves once it is active (rejects if it failed to start: the relay's deadline is `--output-start-timeout`, 15 s by default). */
  async start(...[options]: OutputStartArgs<O>): Promise<OutputStatus<O>> {
    const params = (options === undefined ? { output: this.name } : { output: this.name, options }) as OutputStartParams;
    // the relay answers a start of this output with this output's status
    return (await this.connection.request('output.start', params, OUTPUT_CALL_MS)) as OutputStatus<O>;
  }

  /** Stop it; resolves once it is stopped. */
  async stop(): Promise<OutputStatus<O>> {
    return (await this.connection.request('output.stop', { output: this.name }, OUTPUT_CALL_MS)) as OutputStatus<O>;
  }

  /** @internal */
  changed(status: OutputStatus<O>): void {
    this.current = status;
  }
}

/**
 * The shared whiteboard: an output like the others (start/stop with `canWhiteboard`), plus
 * drawing. Everyone sees the shapes (`whiteboard-shape`, `whiteboard-cleared` room events);
 * drawing and clearing need `canWhiteboard`.
 *
 * @example
 * ```ts
 * await room.whiteboard.start();
 * await room.whiteboard.draw({ kind: 'rect', x: 10, y: 10, w: 200, h: 120, color: '#3452d8' });
 * const shapes = await room.whiteboard.getShapes(); // what a late joiner loads
 * ```
 */
export class WhiteboardControl extends OutputControl<'whiteboard'> {
  /** Draw a shape; resolves with it as the board keeps it (with `id` and `by`). */
  async draw(shape: ShapeInput): Promise<Shape> {
    return (await this.connection.request('whiteboard.draw', { shape })).shape;
  }

  /** Remove every shape. */
  async clear(): Promise<void> {
    await this.connection.request('whiteboard.clear', {});
  }

  /** The shapes on the board now, oldest first. */
  async getShapes(): Promise<Shape[]> {
    return (await this.connection.request('whiteboard.shapes', {})).shapes;
  }
}
