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
 * Records the room into `dir`: its timeline — joins and leaves, pubsub messages, streams, output
 * and whiteboard changes, the media files — one JSON object per line (JSON Lines), and each
 * published track as it is published, one WebM file per track (VP8 or Opus, as forwarded; no
 * re-encoding), all sharing the recording's name: `<room>--<time>.jsonl`,
 * `<room>--<time>--<participant>-<source>.webm`.
 */
export class RecordingProvider implements OutputProvider {
  private out: WriteStream | null = null;
  private off: (() => void) | null = null;
  private offMedia: (() => void) | null = null;
  private readonly recorders = new Set<Promise<{ stop(): Promise<void> }>>();

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
    const base = file.slice(0, -'.jsonl'.length);
    this.offMedia = this.ctx.tapMedia((track) => {
      const media = `${base}--${safeName(track.participantId)}-${track.source}.webm`;
      const recorder = track.record(join(this.dir, media));
      this.recorders.add(recorder);
      recorder.then(
        () => this.ctx.timeline.emit({ type: 'track-recorded', participantId: track.participantId, source: track.source, kind: track.kind, file: media }),
        (err: Error) => this.ctx.log.warn(`recording of ${track.participantId} ${track.source} failed: ${err.message}`),
      );
      return () => {
        this.recorders.delete(recorder);
        void recorder.then((r) => r.stop()).catch(() => undefined);
      };
    });
    return { file, url: `/recordings/${encodeURIComponent(file)}` };
  }

  async stop(): Promise<void> {
    this.offMedia?.();
    this.offMedia = null;
    const recorders = [...this.recorders];
    this.recorders.clear();
    await Promise.allSettled(recorders.map((r) => r.then((x) => x.stop())));
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
    .filter((f) => f.startsWith(prefix) && (f.endsWith('.jsonl') || f.endsWith('.webm')))
    .map((file) => ({ file, roomId, size: statSync(join(dir, file)).size, startedAt: file.slice(prefix.length).split('--')[0]!.replace(/\.jsonl$/, '') }))
    .sort((a, b) => b.file.localeCompare(a.file));
}
