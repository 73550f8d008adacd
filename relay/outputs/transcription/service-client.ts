/**
 * A speech service speaking the common OpenAI-style API: `POST /v1/audio/transcriptions`,
 * multipart with `file` (a WAV) and `model`, answered `{ "text": "..." }`. Bounded on every
 * side: a few requests at once, a short queue that drops the newest utterance when the service
 * lags (and says so in the log, at most every 30 s), a deadline per request, an answer read up to
 * 64 KiB, a text of at most 2,000 characters. Nothing here ever waits on the relay's behalf.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../../log.ts';

/** How a {@link SpeechService} talks to its service. */
export interface SpeechServiceOptions {
  /** The endpoint; a URL without a path gets `/v1/audio/transcriptions`. */
  url: string;
  /** The `model` field (servers that have one model ignore it). */
  model: string;
  /** Each request's deadline (ms). */
  timeoutMs: number;
  /** Requests in flight at once. */
  concurrency: number;
  /** Utterances waiting beyond those in flight; more are dropped. */
  maxQueued: number;
  log: Logger;
}

/** The defaults for one room's transcription. */
export const SERVICE_DEFAULTS = { model: 'whisper-1', timeoutMs: 15_000, concurrency: 2, maxQueued: 8 } as const;

const MAX_ANSWER_BYTES = 64 * 1024;
const MAX_TEXT = 2000;
const LOG_EVERY_MS = 30_000;

/** One utterance to recognise. */
export interface SpeechJob {
  wav: Buffer;
  /** The primary language subtag (`en` of `en-US`), as the API's `language` field. */
  language: string;
  /** The service's text (trimmed, bounded); not called when it failed. */
  done(text: string): void;
}

/** The endpoint a configured URL means. */
export function transcriptionEndpoint(url: string): URL {
  const endpoint = new URL(url);
  if (endpoint.pathname === '/' || endpoint.pathname === '') endpoint.pathname = '/v1/audio/transcriptions';
  return endpoint;
}

function multipart(job: SpeechJob, model: string): { body: Buffer; type: string } {
  const boundary = `tessera-${randomBytes(12).toString('hex')}`;
  const field = (name: string, value: string) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  const head = `${field('model', model)}${field('language', job.language)}${field('response_format', 'json')}--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="utterance.wav"\r\nContent-Type: audio/wav\r\n\r\n`;
  return { body: Buffer.concat([Buffer.from(head), job.wav, Buffer.from(`\r\n--${boundary}--\r\n`)]), type: `multipart/form-data; boundary=${boundary}` };
}

/** Read at most `limit` bytes of a response body (null when it is longer). */
async function boundedText(res: Response, limit: number): Promise<string | null> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}

export class SpeechService {
  private readonly queue: SpeechJob[] = [];
  private inFlight = 0;
  private readonly endpoint: URL;
  private readonly aborts = new Set<AbortController>();
  private closed = false;
  private readonly problems = { dropped: 0, failed: 0, lastLog: 0, last: '' };

  constructor(private readonly options: SpeechServiceOptions) {
    this.endpoint = transcriptionEndpoint(options.url);
  }

  /** Queue an utterance; `false` (and counted for the log) when the queue is full. */
  submit(job: SpeechJob): boolean {
    if (this.closed) return false;
    if (this.inFlight >= this.options.concurrency && this.queue.length >= this.options.maxQueued) {
      this.problems.dropped++;
      this.report('the transcription service lags: utterances dropped');
      return false;
    }
    this.queue.push(job);
    this.next();
    return true;
  }

  /** Drop what waits and abort what is in flight. */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    for (const abort of this.aborts) abort.abort();
  }

  private next(): void {
    while (!this.closed && this.inFlight < this.options.concurrency && this.queue.length) {
      const job = this.queue.shift()!;
      this.inFlight++;
      void this.send(job).finally(() => {
        this.inFlight--;
        this.next();
      });
    }
  }

  private async send(job: SpeechJob): Promise<void> {
    const abort = new AbortController();
    this.aborts.add(abort);
    const timer = setTimeout(() => abort.abort(), this.options.timeoutMs);
    try {
      const { body, type } = multipart(job, this.options.model);
      const res = await fetch(this.endpoint, { method: 'POST', headers: { 'content-type': type }, body: Uint8Array.from(body), signal: abort.signal, redirect: 'error' });
      const answer = await boundedText(res, MAX_ANSWER_BYTES);
      if (!res.ok) throw new Error(`it answered ${res.status}`);
      if (answer === null) throw new Error(`its answer is over ${MAX_ANSWER_BYTES} bytes`);
      const text = (JSON.parse(answer) as { text?: unknown }).text;
      if (typeof text !== 'string') throw new Error('its answer has no text');
      if (!this.closed) job.done(text.trim().slice(0, MAX_TEXT));
    } catch (err) {
      if (this.closed) return;
      this.problems.failed++;
      this.report(`the transcription service failed: ${abort.signal.aborted ? `no answer within ${this.options.timeoutMs} ms` : (err as Error).message}`);
    } finally {
      clearTimeout(timer);
      this.aborts.delete(abort);
    }
  }

  private report(what: string): void {
    const now = Date.now();
    if (now - this.problems.lastLog < LOG_EVERY_MS && what === this.problems.last) return;
    this.options.log.warn(what, { url: this.endpoint.origin, dropped: this.problems.dropped, failed: this.problems.failed });
    this.problems.lastLog = now;
    this.problems.last = what;
  }
}
