import { SdkError } from '../errors.ts';
import type { StreamInfo } from '../protocol/messages.ts';

/** Unread bytes all incoming streams together may hold by default (see `DataStreams.maxUnreadBytes`). */
export const MAX_UNREAD_BYTES = 64 * 1024 * 1024;

/**
 * What a chunk waiting unread is charged at least, against `maxUnreadBytes`: about what holding
 * any chunk costs (its buffer, the views on it, its place in the queue), so that a relay sending
 * chunks of a byte cannot make the allowance hold far more memory than it says.
 */
const MIN_CHUNK_CHARGE = 256;

/** What `chunk` costs the allowance while it waits unread. */
const charge = (chunk: Uint8Array) => Math.max(chunk.byteLength, MIN_CHUNK_CHARGE);

/** Options of {@link IncomingStream.readAll}, `readText` and `readBlob`. */
export interface ReadOptions {
  /** The most bytes to gather (default: the room's `dataStream.maxUnreadBytes`, 64 MiB): a stream announcing more is refused and left. */
  maxBytes?: number;
}

/** What an incoming stream needs of its room's streams. */
export interface IncomingOwner {
  /** The room's allowance of unread bytes: also what `readAll` gathers at most, unless told otherwise. */
  readonly maxUnreadBytes: number;
  /** Take `bytes` more unread bytes from the room's allowance; false when that would pass it. */
  hold(bytes: number): boolean;
  /** Give back unread bytes (read, or let go). */
  release(bytes: number): void;
  /** It wants no more bytes (cancelled, not read, or broken): forget it and tell the relay. */
  leave(stream: IncomingStream): void;
}

/**
 * A data stream arriving from another participant: its metadata at once, its bytes as they
 * come. Read it once, with `for await` or one of the `read*` helpers, or `cancel()` it. Bytes
 * wait for their readers in memory up to `room.dataStream.maxUnreadBytes` for all streams
 * together (64 MiB by default; each chunk waiting counts at least 256 bytes): a stream whose
 * next chunk would pass that is given up (`TIMEOUT`, `slow-recipient`) and the relay sends no
 * more of it, so a member cannot fill another's memory with streams it does not want. An empty
 * chunk (the relay never forwards one) ends the stream (`INTERNAL_ERROR`, `bad-chunk`).
 *
 * @example
 * ```ts
 * room.dataStream.on('stream', async (stream) => {
 *   if (stream.topic !== 'files') return stream.cancel();
 *   if (stream.kind === 'text') console.log(stream.from, await stream.readText());
 *   else for await (const chunk of stream) progress(stream.received / stream.size);
 * });
 * ```
 */
export class IncomingStream implements AsyncIterable<Uint8Array> {
  /** The stream's id in the room. */
  readonly id: number;
  /** The sender's participant id (stamped by the relay). */
  readonly from: string;
  readonly topic?: string;
  /** Total bytes. */
  readonly size: number;
  /** What was sent: a string (`text`), bytes, or a Blob/File. */
  readonly kind: StreamInfo['kind'];
  readonly mimeType?: string;
  readonly name?: string;
  /** Unix milliseconds at which the relay opened it. */
  readonly timestamp: number;
  /** Bytes received so far. */
  received = 0;
  /** Chunks not read yet: `queue[head]` is the next (a head index: shifting a long array is quadratic). */
  private queue: Uint8Array[] = [];
  private head = 0;
  private done = false;
  private error: SdkError | null = null;
  private wake: (() => void) | null = null;
  private reading = false;
  private nextSeq = 0;
  /** What a running `readAll` has taken out of the queue and keeps on the allowance. */
  private gathered = 0;

  /**
   * @internal
   * @param account its unread bytes, shared with the owner: given back if the stream is dropped
   *   by the app unread (garbage-collected), not only when it is read, cancelled or fails
   */
  constructor(
    info: StreamInfo,
    private readonly owner: IncomingOwner | null = null,
    private readonly account: { unread: number } = { unread: 0 },
  ) {
    this.id = info.streamId;
    this.from = info.from;
    this.size = info.size;
    this.kind = info.kind;
    this.timestamp = info.timestamp;
    if (info.topic !== undefined) this.topic = info.topic;
    if (info.mimeType !== undefined) this.mimeType = info.mimeType;
    if (info.name !== undefined) this.name = info.name;
  }

  /** @internal */
  push(seq: number, chunk: Uint8Array): void {
    if (this.done || this.error) return;
    if (seq !== this.nextSeq) return this.giveUp(new SdkError('CONNECTION_LOST', `chunk ${seq} arrived where ${this.nextSeq} was due`, { reason: 'out-of-order' }));
    // the relay forwards no empty chunk (it aborts a stream sent one): queued, they cost memory and carry nothing
    if (chunk.byteLength === 0) return this.giveUp(new SdkError('INTERNAL_ERROR', `chunk ${seq} is empty`, { reason: 'bad-chunk' }));
    if (this.received + chunk.byteLength > this.size) {
      return this.giveUp(new SdkError('INTERNAL_ERROR', `more than the ${this.size} bytes the stream announced`, { reason: 'bad-chunk' }));
    }
    const cost = charge(chunk);
    if (this.owner && !this.owner.hold(cost)) {
      return this.giveUp(new SdkError('TIMEOUT', `not read fast enough: incoming streams held maxUnreadBytes unread (this one ${this.account.unread} bytes)`, { reason: 'slow-recipient' }));
    }
    this.nextSeq++;
    this.received += chunk.byteLength;
    this.account.unread += cost;
    this.queue.push(chunk);
    this.signal();
  }

  /** @internal */
  end(): void {
    if (this.received !== this.size) {
      return this.fail(new SdkError('CONNECTION_LOST', `the stream ended after ${this.received} of ${this.size} bytes`, { reason: 'truncated' }));
    }
    this.done = true;
    this.signal();
  }

  /** @internal */
  fail(error: SdkError): void {
    if (this.done || this.error) return;
    this.error = error;
    this.drop();
    this.signal();
  }

  /**
   * Stop receiving this stream: what waits unread is let go, the relay sends no more of it, and
   * a reader still running ends (without an error). For a stream you do not want, or stopped
   * reading: breaking out of `for await` does the same.
   */
  cancel(): void {
    // an ended stream may still hold its bytes unread: they are let go all the same
    this.drop();
    if (this.done || this.error) return;
    this.done = true;
    this.owner?.leave(this);
    this.signal();
  }

  /** Ends in `error` and tells the relay to send no more. */
  private giveUp(error: SdkError): void {
    this.fail(error);
    this.owner?.leave(this);
  }

  private drop(): void {
    this.owner?.release(this.account.unread);
    this.queue = [];
    this.head = 0;
    this.account.unread = 0;
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** The next chunk, out of the queue: its cost given back to the allowance, or kept on it as {@link gathered}. */
  private next(keep: boolean): Uint8Array | undefined {
    if (this.head >= this.queue.length) return undefined;
    const chunk = this.queue[this.head]!;
    this.queue[this.head++] = EMPTY;
    const cost = charge(chunk);
    this.account.unread -= cost;
    if (keep) this.gathered += cost;
    else this.owner?.release(cost);
    if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    return chunk;
  }

  /** The chunks as they arrive (`for await`); throws the stream's error if it stops early. Leaving the loop early cancels the stream. */
  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    return this.chunks(false);
  }

  /** The chunks as they arrive; `keep`: each stays on the room's allowance once read (see {@link readAll}). */
  private async *chunks(keep: boolean): AsyncGenerator<Uint8Array> {
    if (this.reading) throw new SdkError('INVALID_STATE', 'this stream is already being read', { reason: 'already-read' });
    this.reading = true;
    try {
      for (;;) {
        const chunk = this.next(keep);
        if (chunk) yield chunk;
        else if (this.error) throw this.error;
        else if (this.done) return;
        else await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      // a reader that broke out (or threw) wants no more: nothing is kept for nobody
      this.cancel();
    }
  }

  /**
   * All the bytes, once the stream has ended (gathered as they come, never the announced size
   * ahead of them). A stream announcing more than `maxBytes` (by default the room's
   * `dataStream.maxUnreadBytes`, 64 MiB) is refused at once, `PAYLOAD_TOO_LARGE`
   * (`stream-too-large`), and left: its sender chooses its size (up to the relay's stream limit,
   * 4 GiB by default). What is gathered counts on `maxUnreadBytes` until the read is over, like
   * bytes not read yet, so reads of many streams at once hold no more than that together (a
   * stream whose next chunk would pass it is given up, `slow-recipient`). For larger streams,
   * raise `maxUnreadBytes` and pass a larger `maxBytes`, or read the chunks as they come with
   * `for await`.
   */
  async readAll(options: ReadOptions = {}): Promise<Uint8Array<ArrayBuffer>> {
    const maxBytes = options.maxBytes ?? this.owner?.maxUnreadBytes ?? MAX_UNREAD_BYTES;
    if (typeof maxBytes !== 'number' || !(maxBytes >= 0)) throw new SdkError('INVALID_ARGUMENT', 'maxBytes must be a number of bytes, 0 or more (Infinity: no limit)');
    // a stream already being read is that reader's, what it gathered too
    if (this.reading) throw new SdkError('INVALID_STATE', 'this stream is already being read', { reason: 'already-read' });
    // one that ended or failed holds what it holds (its error, or its bytes, all unread and counted)
    if (!this.done && !this.error && this.size > maxBytes) {
      const error = new SdkError('PAYLOAD_TOO_LARGE', `the stream announced ${this.size} bytes: more than the ${maxBytes} this read gathers (pass a larger maxBytes, or read it with for await)`, { reason: 'stream-too-large' });
      this.giveUp(error);
      throw error;
    }
    // what is gathered stays on the room's allowance until the read is over: reads of many
    // streams at once hold no more together than the unread bytes may (each read alone once
    // gave its bytes back, and sixteen streams of 64 MiB grew a reader by 1 GiB)
    const chunks: Uint8Array[] = [];
    let total = 0;
    try {
      for await (const chunk of this.chunks(true)) {
        chunks.push(chunk);
        total += chunk.byteLength;
      }
    } finally {
      this.owner?.release(this.gathered);
      this.gathered = 0;
    }
    const out = new Uint8Array(total);
    let offset = 0;
    for (const chunk of chunks) {
      out.set(chunk, offset);
      offset += chunk.byteLength;
    }
    return out;
  }

  /** The bytes decoded as UTF-8 (for `text` streams); at most `maxBytes` (see {@link readAll}). */
  async readText(options: ReadOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.readAll(options));
  }

  /**
   * The bytes as a Blob (browsers, and Node ≥ 18); at most `maxBytes` (see {@link readAll}). Its
   * type is `options.type` if given, else the sender's `mimeType` when it is one a browser shows
   * without running it (images, audio, video, plain text, CSV, PDF, JSON, ZIP), else
   * `application/octet-stream`: the sender chooses its type, and a `blob:` URL of `text/html`
   * (or SVG, or XML) opened in a tab runs its scripts in your page's origin.
   */
  async readBlob(options: ReadOptions & { type?: string } = {}): Promise<Blob> {
    const type = options.type ?? (this.mimeType !== undefined && PASSIVE_TYPE.test(this.mimeType) ? this.mimeType : 'application/octet-stream');
    return new Blob([await this.readAll(options)], { type });
  }
}

const EMPTY = new Uint8Array(0);

/** MIME types `readBlob` keeps from a sender: none runs script when its `blob:` URL is opened (parameters such as a charset allowed). */
const PASSIVE_TYPE = /^(?:image\/(?:png|jpeg|gif|webp|avif|bmp)|audio\/[\w.+-]+|video\/[\w.+-]+|text\/(?:plain|csv)|application\/(?:pdf|json|zip|octet-stream))(?:\s*;.*)?$/i;
