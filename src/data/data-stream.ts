import type { Connection } from '../connection.ts';
import { call, Emitter, type Listener } from '../emitter.ts';
import { SdkError } from '../errors.ts';
import { cleanName } from '../protocol/text.ts';
import { CHUNK_HEADER_BYTES, decodeChunkHeader, encodeChunk, MAX_LEAVE_IDS, type StreamInfo, type StreamOpenParams, type ReceivedError } from '../protocol/messages.ts';
import { IncomingStream, MAX_UNREAD_BYTES } from './incoming-stream.ts';

/** Options of {@link DataStreams.send}. */
export interface StreamSendOptions {
  topic?: string;
  /** Only these participant ids receive it (viewers included). Default: everyone who may receive data. */
  to?: string[];
  /** Defaults to the Blob's type. */
  mimeType?: string;
  /** Defaults to the File's name. */
  name?: string;
  /** Called as the relay takes the bytes on. An exception it throws is reported (like any listener's); the send goes on. */
  onProgress?: (progress: { sent: number; total: number }) => void;
}

/** What {@link DataStreams.send} resolves to once every byte is with the relay. */
export interface StreamSent {
  id: number;
  size: number;
}

/** Events of `room.dataStream`. */
export interface DataStreamEvents {
  /** A stream from another participant begins; read it from the object. */
  stream: IncomingStream;
}

interface Source {
  size: number;
  kind: StreamOpenParams['kind'];
  mimeType?: string;
  name?: string;
  read(offset: number, length: number): Promise<Uint8Array>;
}

function sourceOf(data: unknown): Source {
  if (typeof data === 'string') {
    const bytes = new TextEncoder().encode(data);
    return { size: bytes.byteLength, kind: 'text', read: async (o, n) => bytes.subarray(o, o + n) };
  }
  if (data instanceof Uint8Array) return { size: data.byteLength, kind: 'bytes', read: async (o, n) => data.subarray(o, o + n) };
  if (data instanceof ArrayBuffer) return sourceOf(new Uint8Array(data));
  if (typeof Blob !== 'undefined' && data instanceof Blob) {
    const name = (data as { name?: unknown }).name;
    return {
      size: data.size,
      kind: 'blob',
      ...(data.type ? { mimeType: data.type } : {}),
      // a File's own name (a tab is a legal character of a Linux file name): the relay refuses what
      // a display name may not hold, and this name was not chosen for the room
      ...(typeof name === 'string' && name ? { name: cleanName(name).slice(0, 256).replace(/[\uD800-\uDBFF]$/, '') } : {}),
      read: async (o, n) => new Uint8Array(await data.slice(o, o + n).arrayBuffer()),
    };
  }
  throw new SdkError('INVALID_ARGUMENT', 'dataStream.send takes a string, a Uint8Array, an ArrayBuffer or a Blob');
}

/** Incoming streams open at once that the SDK keeps (each sender has at most 8 open, see docs/data.md). */
export const MAX_INCOMING_STREAMS = 1024;

/** A stream being sent: the relay's acknowledgements, and whether it was aborted. */
class Outgoing {
  acked = -1;
  /** Chunks sent so far: an acknowledgement of one not sent yet is not believed. */
  sent = 0;
  error: SdkError | null = null;
  private wake: (() => void) | null = null;

  ack(seq: number): void {
    // a relay acknowledging chunks never sent would have the whole source read into the socket
    if (seq >= this.sent) return;
    if (seq > this.acked) this.acked = seq;
    this.signal();
  }

  fail(error: SdkError): void {
    this.error ??= error;
    this.signal();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** Wait until `seq` is acknowledged. */
  async until(seq: number): Promise<void> {
    while (this.acked < seq) {
      if (this.error) throw this.error;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    if (this.error) throw this.error;
  }
}

/**
 * Data of any size, in ordered chunks with flow control: `send` never runs more than a window
 * ahead of the relay, which never runs ahead of its slowest recipient.
 * Sending needs `canPublishData`; receiving needs `canSubscribeData` (the relay decides).
 *
 * @example
 * ```ts
 * await room.dataStream.send(file, { onProgress: ({ sent, total }) => bar(sent / total) });
 * room.dataStream.on('stream', async (stream) => save(stream.name, await stream.readBlob()));
 * ```
 */
export class DataStreams {
  private readonly events = new Emitter<DataStreamEvents>();
  private readonly incoming = new Map<number, IncomingStream>();
  private readonly outgoing = new Map<number, Outgoing>();
  /**
   * Bytes incoming streams together may hold unread (64 MiB by default): a stream whose next
   * chunk would pass it is given up (its reader gets `TIMEOUT`, `slow-recipient`) and the relay
   * sends no more of it. Each chunk waiting counts at least 256 bytes, so that tiny chunks cannot
   * hold far more memory than this says (a chunk holds about 500 bytes besides its own: chunks of
   * 1 to 256 bytes hold up to 2.8 times the allowance, chunks of kilobytes, as senders send, about
   * it). Raise it for large files read slowly; streams read as they come never get near it.
   */
  maxUnreadBytes = MAX_UNREAD_BYTES;
  private unread = 0;
  /** Streams to leave, sent together (see {@link leaveSoon}); one `stream.leave` in flight at a time. */
  private readonly leaving = new Set<number>();
  private leaveDue = false;
  /** The relay took no `streamIds` (a release before them): one id a request, still one on its way at a time. */
  private leaveOneByOne = false;
  /** Streams the app let go of unread (garbage-collected) give their bytes back. */
  private readonly unheld = typeof FinalizationRegistry === 'function' ? new FinalizationRegistry<{ unread: number }>((account) => this.release(account.unread)) : null;

  /** @internal */
  constructor(private readonly connection: Connection) {}

  /** Listen for incoming streams. Streams that arrive while nobody listens are not kept. */
  on<E extends keyof DataStreamEvents>(event: E, listener: Listener<DataStreamEvents[E]>): () => void {
    return this.events.on(event, listener);
  }

  /** Remove a listener. */
  off<E extends keyof DataStreamEvents>(event: E, listener: Listener<DataStreamEvents[E]>): void {
    this.events.off(event, listener);
  }

  /** Send a string, bytes or a Blob; resolves once the relay has every byte. */
  async send(data: string | Uint8Array | ArrayBuffer | Blob, options: StreamSendOptions = {}): Promise<StreamSent> {
    const source = sourceOf(data);
    const params: StreamOpenParams = {
      size: source.size,
      kind: source.kind,
      ...(options.topic === undefined ? {} : { topic: options.topic }),
      ...(options.to === undefined ? {} : { to: options.to }),
      ...((options.mimeType ?? source.mimeType) === undefined ? {} : { mimeType: options.mimeType ?? source.mimeType }),
      ...((options.name ?? source.name) === undefined ? {} : { name: options.name ?? source.name }),
    };
    const { streamId, chunkBytes, window } = await this.connection.request('stream.open', params);
    // the relay gave the id of a stream still being sent: its acks and its end could not be told apart
    if (this.outgoing.has(streamId)) throw new SdkError('INTERNAL_ERROR', `the relay answered stream.open with the id of a stream still being sent (${streamId})`, { reason: 'bad-frame' });
    const out = new Outgoing();
    this.outgoing.set(streamId, out);
    const chunks = Math.ceil(source.size / chunkBytes);
    const report = options.onProgress;
    let closing = false;
    try {
      for (let seq = 0; seq < chunks; seq++) {
        if (seq - out.acked > window) await out.until(seq - window);
        if (out.error) throw out.error;
        const offset = seq * chunkBytes;
        const bytes = await source.read(offset, Math.min(chunkBytes, source.size - offset));
        out.sent = seq + 1;
        this.connection.sendBinary(encodeChunk(streamId, seq, bytes));
        // a listener that throws is reported, as every listener is: the transfer goes on
        if (report && out.acked >= 0) call(report, { sent: Math.min(source.size, (out.acked + 1) * chunkBytes), total: source.size });
      }
      await out.until(chunks - 1);
      closing = true;
      await this.connection.request('stream.close', { streamId });
      if (report) call(report, { sent: source.size, total: source.size });
      return { id: streamId, size: source.size };
    } catch (error) {
      if (!closing && !out.error) this.abandon(streamId);
      throw error;
    } finally {
      if (this.outgoing.get(streamId) === out) this.outgoing.delete(streamId);
    }
  }

  /**
   * A send that stopped on this side (its source could not be read, the socket went): closed
   * short of its size, the relay aborts it for its recipients (`stream-incomplete`) and frees its
   * place at once, instead of holding both until the stream goes idle (60 s).
   */
  private abandon(streamId: number): void {
    this.connection.request('stream.close', { streamId }).catch(() => undefined);
  }

  /** @internal */
  hold(bytes: number): boolean {
    if (this.unread + bytes > this.maxUnreadBytes) return false;
    this.unread += bytes;
    return true;
  }

  /** @internal */
  release(bytes: number): void {
    this.unread = Math.max(0, this.unread - bytes);
  }

  /** @internal An incoming stream wants no more bytes: forgotten here, and the relay stops sending it. */
  leave(stream: IncomingStream): void {
    if (this.incoming.get(stream.id) !== stream) return;
    this.incoming.delete(stream.id);
    this.leaveSoon(stream.id);
  }

  /**
   * Tell the relay that this member wants no more of a stream: at once when no `stream.leave` is
   * on its way, else together with the others in the next, when that one is answered; a stream
   * that ends meanwhile is not left at all. A member opening streams and closing them at once,
   * to the whole room, made each member send a request per stream: their own requests waited
   * behind those, past their frame budget, until they timed out.
   */
  private leaveSoon(streamId: number): void {
    this.leaving.add(streamId);
    if (this.leaveDue) return;
    this.leaveDue = true;
    queueMicrotask(() => this.sendLeaves());
  }

  private sendLeaves(): void {
    if (this.leaving.size === 0) {
      this.leaveDue = false;
      return;
    }
    const streamIds: number[] = [];
    const most = this.leaveOneByOne ? 1 : MAX_LEAVE_IDS;
    for (const id of this.leaving) {
      streamIds.push(id);
      this.leaving.delete(id);
      if (streamIds.length === most) break;
    }
    // leaveDue stays set while this one is on its way: what comes meanwhile waits for its answer
    this.connection
      .request('stream.leave', streamIds.length === 1 ? { streamId: streamIds[0]! } : { streamIds })
      .catch((err: unknown) => {
        if (streamIds.length === 1 || (err as { code?: unknown }).code !== 'INVALID_ARGUMENT') return;
        this.leaveOneByOne = true;
        for (const id of streamIds) this.leaving.add(id);
      })
      .finally(() => this.sendLeaves());
  }

  /** @internal */
  opened(info: StreamInfo): void {
    // a relay reusing the id of a stream still open: that one can never end now (its reader waited for ever)
    this.incoming.get(info.streamId)?.fail(new SdkError('INTERNAL_ERROR', 'the relay opened another stream under this one\'s id', { reason: 'bad-frame' }));
    this.incoming.delete(info.streamId);
    if (!this.events.has('stream')) {
      // kept by nobody: the relay need not send its bytes here
      if (info.size > 0) this.leaveSoon(info.streamId);
      return;
    }
    // a relay sends a member at most 8 open streams of each sender; past this many, one opening
    // streams that never end (2.4 KB each) is not believed
    if (this.incoming.size >= MAX_INCOMING_STREAMS) {
      if (info.size > 0) this.leaveSoon(info.streamId);
      return;
    }
    const account = { unread: 0 };
    const stream = new IncomingStream(info, this, account);
    this.unheld?.register(stream, account);
    this.incoming.set(info.streamId, stream);
    this.events.emit('stream', stream);
    if (info.size === 0) this.ended(info.streamId);
  }

  /** @internal */
  chunk(frame: Uint8Array): void {
    const header = decodeChunkHeader(frame);
    if (header) this.incoming.get(header.streamId)?.push(header.seq, frame.subarray(CHUNK_HEADER_BYTES));
  }

  /** @internal */
  ended(streamId: number): void {
    this.leaving.delete(streamId);
    this.incoming.get(streamId)?.end();
    this.incoming.delete(streamId);
  }

  /** @internal */
  aborted(streamId: number, error: ReceivedError): void {
    const err = SdkError.fromWire(error);
    this.leaving.delete(streamId);
    this.incoming.get(streamId)?.fail(err);
    this.incoming.delete(streamId);
    this.outgoing.get(streamId)?.fail(err);
  }

  /** @internal */
  acked(streamId: number, seq: number): void {
    this.outgoing.get(streamId)?.ack(seq);
  }

  /** @internal The connection dropped: streams in flight end in an error (listeners stay). */
  interrupted(): void {
    // the relay's streams went with the session or the link: nothing left to leave
    this.leaving.clear();
    if (this.incoming.size + this.outgoing.size === 0) return;
    const error = new SdkError('CONNECTION_LOST', 'the connection dropped before the stream ended', { reason: 'connection-dropped' });
    for (const stream of this.incoming.values()) stream.fail(error);
    for (const out of this.outgoing.values()) out.fail(error);
    this.incoming.clear();
  }

  /** @internal The session ended: nothing more will arrive or leave. */
  closed(): void {
    this.interrupted();
    this.events.clear();
  }
}
