import { SdkError } from '../errors.ts';
import type { StreamInfo } from '../protocol/messages.ts';

/**
 * A data stream arriving from another participant: its metadata at once, its bytes as they
 * come. Read it once, with `for await` or one of the `read*` helpers.
 *
 * @example
 * ```ts
 * room.dataStream.on('stream', async (stream) => {
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
  private readonly queue: Uint8Array[] = [];
  private done = false;
  private error: SdkError | null = null;
  private wake: (() => void) | null = null;
  private reading = false;
  private nextSeq = 0;

  /** @internal */
  constructor(info: StreamInfo) {
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
    if (seq !== this.nextSeq) return this.fail(new SdkError('CONNECTION_LOST', `chunk ${seq} arrived where ${this.nextSeq} was due`, { reason: 'out-of-order' }));
    this.nextSeq++;
    this.received += chunk.byteLength;
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
    this.signal();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** The chunks as they arrive (`for await`); throws the stream's error if it stops early. */
  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    if (this.reading) throw new SdkError('INVALID_STATE', 'this stream is already being read', { reason: 'already-read' });
    this.reading = true;
    for (;;) {
      const chunk = this.queue.shift();
      if (chunk) yield chunk;
      else if (this.error) throw this.error;
      else if (this.done) return;
      else await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** All the bytes, once the stream has ended. */
  async readAll(): Promise<Uint8Array<ArrayBuffer>> {
    const out = new Uint8Array(this.size);
    let offset = 0;
    for await (const chunk of this) {
      out.set(chunk, offset);
      offset += chunk.byteLength;
    }
    return out;
  }

  /** The bytes decoded as UTF-8 (for `text` streams). */
  async readText(): Promise<string> {
    return new TextDecoder().decode(await this.readAll());
  }

  /** The bytes as a Blob with the sender's MIME type (browsers, and Node ≥ 18). */
  async readBlob(): Promise<Blob> {
    return new Blob([await this.readAll()], this.mimeType ? { type: this.mimeType } : {});
  }
}
