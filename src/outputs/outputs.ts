import type { Connection } from '../connection.ts';
import type { OutputName, OutputState, OutputStatus, Shape, ShapeInput } from '../protocol/control.ts';

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
 * console.log(room.recording.state, room.recording.status.info?.url);
 * ```
 */
export class OutputControl {
  private current: OutputStatus;

  /** @internal */
  constructor(
    /** Which output. */
    readonly name: OutputName,
    protected readonly connection: Connection,
    initial: OutputStatus,
  ) {
    this.current = initial;
  }

  /** `stopped`, `starting`, `active`, `stopping` or `failed`. */
  get state(): OutputState {
    return this.current.state;
  }

  /** The state with who changed it, the error of a failure, and where to find the product. */
  get status(): OutputStatus {
    return this.current;
  }

  /** Start it; resolves once it is active (rejects if it failed to start). */
  start(options: Record<string, unknown> = {}): Promise<OutputStatus> {
    return this.connection.request('output.start', { output: this.name, options });
  }

  /** Stop it; resolves once it is stopped. */
  stop(): Promise<OutputStatus> {
    return this.connection.request('output.stop', { output: this.name });
  }

  /** @internal */
  changed(status: OutputStatus): void {
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
export class WhiteboardControl extends OutputControl {
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
