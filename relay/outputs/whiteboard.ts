import type { Shape, ShapeInput } from '../../src/protocol/control.ts';
import type { Budget } from '../budget.ts';
import { RelayError } from '../context.ts';
import type { OutputContext, OutputProvider } from './board.ts';

interface Kept {
  shape: Shape;
  bytes: number;
}

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
  ) {}

  async start(): Promise<Record<string, string>> {
    this.release();
    return { maxBytes: String(this.budget.limit) };
  }

  async stop(): Promise<void> {
    this.release();
  }

  /** Bytes the board keeps now: what an answer with every shape costs. */
  get bytes(): number {
    return this.budget.inUse;
  }

  /** The size of a shape as kept and sent (its JSON, plus the id and author the relay adds). */
  static cost(by: string, input: ShapeInput): number {
    return Buffer.byteLength(JSON.stringify(input)) + by.length + 32;
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
    this.shapes.push({ shape, bytes });
    this.ctx.broadcast({ type: 'event', name: 'whiteboard-shape', data: shape }, true);
    this.ctx.timeline.emit({ type: 'whiteboard', action: 'draw', by, shapeId: shape.id });
    return shape;
  }

  clear(by: string): void {
    this.release();
    this.ctx.broadcast({ type: 'event', name: 'whiteboard-cleared', data: { by } });
    this.ctx.timeline.emit({ type: 'whiteboard', action: 'clear', by });
  }

  all(): Shape[] {
    return this.shapes.map((k) => k.shape);
  }

  private release(): void {
    this.budget.give(this.budget.inUse);
    this.shapes = [];
  }
}
