import type { OutputInfo } from '../../src/protocol/control.ts';
import type { Shape, ShapeInput } from '../../src/protocol/control.ts';
import type { Budget } from '../budget.ts';
import type { ArenaBytes, ByteArena } from '../data/byte-arena.ts';
import { eventFrame, objectOfArray } from '../data/raw-json.ts';
import { RelayError } from '../errors.ts';
import type { OutputContext, OutputProvider } from './board.ts';

/** A kept shape: its JSON (in the relay's arena: `data/byte-arena.ts`), not its parsed arrays. */
interface Kept {
  json: ArenaBytes;
  bytes: number;
}

/** What the frame around a shape adds to its size. */
const FRAME_BYTES = 64;

/**
 * The server-hosted whiteboard: shapes drawn through the relay, stamped with an id and their
 * author, sent to everyone (optional traffic: a member not keeping up misses strokes rather than
 * being cut), and kept while the board is active so late joiners get them. What it keeps is a
 * byte budget (the board's, nested in the relay's); a full board refuses draws until cleared.
 */
export class WhiteboardProvider implements OutputProvider {
  private shapes: Kept[] = [];
  private seq = 0;

  constructor(
    private readonly ctx: OutputContext,
    private readonly budget: Budget,
    private readonly arena: ByteArena,
  ) {}

  async start(): Promise<OutputInfo['whiteboard']> {
    this.release();
    return { maxBytes: this.budget.limit };
  }

  async stop(): Promise<void> {
    this.release();
  }

  /** Bytes the board keeps now: what an answer with every shape costs. */
  get bytes(): number {
    return this.budget.inUse;
  }

  /** The size of a shape as kept and sent (its JSON, plus the id, the author and the frame around it). */
  static cost(by: string, input: ShapeInput): number {
    return Buffer.byteLength(JSON.stringify(input)) + by.length + FRAME_BYTES + 48;
  }

  draw(by: string, input: ShapeInput): Shape {
    const bytes = WhiteboardProvider.cost(by, input);
    if (!this.budget.take(bytes)) {
      const full = this.budget.inUse + bytes > this.budget.limit;
      throw full
        ? new RelayError('PAYLOAD_TOO_LARGE', `the board holds at most ${this.budget.limit} bytes of shapes: clear it`, 'board-full')
        : new RelayError('RATE_LIMITED', 'the relay holds all the whiteboard shapes it can: clear a board, or try later', 'whiteboards-full');
    }
    const shape = { ...input, id: `s${(++this.seq).toString(36)}`, by } as Shape;
    const { frame, json } = eventFrame('whiteboard-shape', shape);
    this.shapes.push({ json: this.arena.keep(json), bytes });
    this.ctx.broadcastRaw(frame, true);
    this.ctx.timeline.emit({ type: 'whiteboard', action: 'draw', by, shapeId: shape.id });
    return shape;
  }

  clear(by: string): void {
    this.release();
    this.ctx.broadcastLazy({ type: 'event', name: 'whiteboard-cleared', data: { by } });
    this.ctx.timeline.emit({ type: 'whiteboard', action: 'clear', by });
  }

  /** Every shape, as the JSON of a `whiteboard.shapes` result (`{"shapes":[...]}`), spliced from the kept bytes. */
  all(): Buffer {
    return objectOfArray('shapes', this.shapes.map((k) => k.json));
  }

  private release(): void {
    this.budget.give(this.budget.inUse);
    for (const shape of this.shapes) shape.json.free();
    this.shapes = [];
  }
}
