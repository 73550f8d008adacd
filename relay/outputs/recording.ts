import { createWriteStream, mkdirSync, readdirSync, statSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import type { OutputContext, OutputProvider } from './board.ts';

/** Room ids become file names: anything but letters, digits, - and _ is replaced. */
export const safeName = (id: string) => id.replace(/[^\w-]/g, '_').slice(0, 100);

/** A recording on disk. */
export interface RecordingFile {
  file: string;
  roomId: string;
  size: number;
  startedAt: string;
}

/**
 * Records the room to a file in `dir`: today its timeline — joins and leaves, pubsub messages,
 * streams, output and whiteboard changes — one JSON object per line (JSON Lines). The media
 * tracks join the recording when the relay forwards media.
 */
export class RecordingProvider implements OutputProvider {
  private out: WriteStream | null = null;
  private off: (() => void) | null = null;

  constructor(
    private readonly ctx: OutputContext,
    private readonly dir: string,
    private readonly failed: (error: { code: 'CONNECTION_FAILED'; message: string; reason: string }) => void,
  ) {}

  async start(): Promise<Record<string, string>> {
    mkdirSync(this.dir, { recursive: true });
    const startedAt = new Date().toISOString();
    const file = `${safeName(this.ctx.roomId)}--${startedAt.replace(/[:.]/g, '-')}.jsonl`;
    const out = createWriteStream(join(this.dir, file), { flags: 'wx' });
    await new Promise<void>((resolve, reject) => {
      out.once('open', () => resolve());
      out.once('error', reject);
    });
    out.on('error', (err) => this.failed({ code: 'CONNECTION_FAILED', message: `recording: ${err.message}`, reason: 'write-failed' }));
    out.write(`${JSON.stringify({ type: 'recording-started', roomId: this.ctx.roomId, at: Date.now(), format: 'tessera-timeline/1' })}\n`);
    this.off = this.ctx.timeline.on((event) => out.write(`${JSON.stringify(event)}\n`));
    this.out = out;
    return { file, url: `/recordings/${encodeURIComponent(file)}` };
  }

  async stop(): Promise<void> {
    this.off?.();
    this.off = null;
    const out = this.out;
    this.out = null;
    if (!out) return;
    out.write(`${JSON.stringify({ type: 'recording-stopped', at: Date.now() })}\n`);
    await new Promise<void>((resolve) => out.end(resolve));
  }
}

/** The recordings of one room in `dir`, newest first. */
export function listRecordings(dir: string, roomId: string): RecordingFile[] {
  const prefix = `${safeName(roomId)}--`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((f) => f.startsWith(prefix) && f.endsWith('.jsonl'))
    .map((file) => ({ file, roomId, size: statSync(join(dir, file)).size, startedAt: file.slice(prefix.length, -6) }))
    .sort((a, b) => b.file.localeCompare(a.file));
}
