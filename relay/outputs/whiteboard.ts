import type { Shape, ShapeInput } from '../../src/protocol/control.ts';
import { RelayError } from '../context.ts';
import type { OutputContext, OutputProvider } from './board.ts';

/** Shapes one board keeps. */
export const MAX_SHAPES = 10_000;

/**
 * The server-hosted whiteboard: shapes drawn through the relay, stamped with an id and their
 * author, sent to everyone, and kept while the board is active so late joiners get them.
 */
export class WhiteboardProvider implements OutputProvider {
  private shapes: Shape[] = [];
  private seq = 0;

  constructor(private readonly ctx: OutputContext) {}

  async start(): Promise<Record<string, string>> {
    this.shapes = [];
    return { maxShapes: String(MAX_SHAPES) };
  }

  async stop(): Promise<void> {
    this.shapes = [];
  }

  draw(by: string, input: ShapeInput): Shape {
    if (this.shapes.length >= MAX_SHAPES) throw new RelayError('PAYLOAD_TOO_LARGE', `the board holds at most ${MAX_SHAPES} shapes: clear it`, 'board-full');
    const shape = { ...input, id: `s${(++this.seq).toString(36)}`, by } as Shape;
    this.shapes.push(shape);
    this.ctx.broadcast({ type: 'event', name: 'whiteboard-shape', data: shape });
    this.ctx.timeline.emit({ type: 'whiteboard', action: 'draw', by, shapeId: shape.id });
    return shape;
  }

  clear(by: string): void {
    this.shapes = [];
    this.ctx.broadcast({ type: 'event', name: 'whiteboard-cleared', data: { by } });
    this.ctx.timeline.emit({ type: 'whiteboard', action: 'clear', by });
  }

  all(): Shape[] {
    return [...this.shapes];
  }
}
