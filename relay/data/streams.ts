import { decodeChunkHeader, CHUNK_HEADER_BYTES, type ServerFrame, type StreamInfo, type StreamOpenParams, type WireError } from '../../src/protocol/messages.ts';
import { RelayError } from '../errors.ts';
import type { Timeline } from '../rooms/timeline.ts';
import type { Member } from '../rooms/member.ts';

/** Limits of data streams. */
export interface StreamLimits {
  /** A member with more unsent bytes than this is not offered new streams (they are optional traffic). */
  sendSoftLimitBytes: number;
  maxStreamBytes: number;
  streamChunkBytes: number;
  streamWindow: number;
  streamHighWater: number;
  /** Unsent bytes at which a member is cut as a slow consumer: streams drop a recipient well before. */
  maxBufferedBytes: number;
  /** A stream that carries nothing for this long is aborted (ms; {@link STREAM_IDLE_MS}). */
  streamIdleMs?: number;
}

/** Streams one sender may have open at once. */
export const MAX_OPEN_STREAMS = 8;
const ACK_RETRY_MS = 5;
/** A recipient that holds a stream back this long is dropped from it; the others go on. */
export const STREAM_LAG_MS = 1000;
/**
 * A stream that has carried nothing for this long is aborted (`TIMEOUT`, `stream-idle`), for its
 * sender and its recipients: an announced stream that never sends would keep every recipient's
 * reader waiting for ever (`--stream-idle`).
 */
export const STREAM_IDLE_MS = 60_000;

interface OpenStream {
  readonly id: number;
  readonly sender: Member;
  readonly recipients: Set<Member>;
  readonly size: number;
  received: number;
  nextSeq: number;
  /** Highest forwarded chunk not yet acknowledged to the sender, or -1. */
  unacked: number;
  /** Highest chunk acknowledged to the sender, or -1: it may send up to `window` past it. */
  acked: number;
  ackTimer: ReturnType<typeof setTimeout> | null;
  /** When it last carried a chunk (or was opened). */
  activeAt: number;
  /** Since when each recipient over the high-water mark has been holding the stream back. */
  readonly lagging: Map<Member, number>;
}

const serialise = (frame: ServerFrame) => Buffer.from(JSON.stringify(frame));

/**
 * The data streams of one room. Chunks are forwarded as they arrive, frame for frame, to each
 * recipient; the sender may run `streamWindow` chunks ahead of the relay's acknowledgement,
 * and an acknowledgement waits while any recipient has more than `streamHighWater` bytes
 * unsent. So neither the relay nor a socket ever holds more than about a window of a stream,
 * whatever its size, and a slow recipient slows its sender instead of growing memory.
 */
export class StreamBoard {
  private readonly streams = new Map<number, OpenStream>();
  private nextId = 1;
  private disposed = false;
  private idleTimer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly limits: StreamLimits,
    private readonly members: () => Iterable<Member>,
    private readonly lookup: (participantId: string) => Member | undefined,
    private readonly timeline: Timeline,
  ) {}

  open(sender: Member, params: StreamOpenParams): { streamId: number; chunkBytes: number; window: number } {
    if (this.disposed) throw new RelayError('ROOM_ENDED', 'the room has ended', 'room-ended');
    if (!sender.fanout.hasCredit()) throw new RelayError('RATE_LIMITED', 'what you sent recently is still being delivered to many members: slow down', 'fanout-rate');
    if (params.size > this.limits.maxStreamBytes) {
      throw new RelayError('PAYLOAD_TOO_LARGE', `a data stream may carry at most ${this.limits.maxStreamBytes} bytes`, 'stream-too-large');
    }
    let open = 0;
    for (const s of this.streams.values()) if (s.sender === sender) open++;
    if (open >= MAX_OPEN_STREAMS) throw new RelayError('RATE_LIMITED', `at most ${MAX_OPEN_STREAMS} streams open at once`, 'too-many-streams');
    const candidates = params.to ? params.to.map((id) => this.lookup(id)) : this.members();
    const recipients = new Set<Member>();
    // a member that is not keeping up misses new streams, like pubsub: opens cannot be aimed at it to get it cut
    for (const m of candidates) if (m && m !== sender && m.grant.canSubscribeData && m.link.bufferedAmount <= this.limits.sendSoftLimitBytes) recipients.add(m);
    const id = this.nextId++;
    const stream: OpenStream = { id, sender, recipients, size: params.size, received: 0, nextSeq: 0, unacked: -1, acked: -1, ackTimer: null, activeAt: performance.now(), lagging: new Map() };
    this.streams.set(id, stream);
    if (!this.idleTimer) {
      // looked at a dozen times per idle time: a stream ends at most a twelfth of it late
      this.idleTimer = setInterval(() => this.abortIdle(), Math.max(10, this.idleMs / 12));
      this.idleTimer.unref();
    }
    const { to: _to, ...meta } = params;
    const info: StreamInfo = { ...meta, streamId: id, from: sender.id, timestamp: Date.now() };
    const data = serialise({ type: 'event', name: 'stream.open', data: info });
    for (const m of recipients) m.link.sendRaw(data);
    // the announcement is a fan-out like any other (a name and a type of 256 characters each, to a thousand members)
    sender.fanout.spend(data.length, recipients.size);
    if (!params.to) this.timeline.emit({ type: 'stream', from: sender.id, size: params.size, kind: params.kind, ...(params.name ? { name: params.name } : {}), ...(params.topic ? { topic: params.topic } : {}) });
    return { streamId: id, chunkBytes: this.limits.streamChunkBytes, window: this.limits.streamWindow };
  }

  /** A binary frame from `sender`: forward it, or abort its stream and say why. */
  chunk(sender: Member, frame: Buffer): void {
    const header = decodeChunkHeader(frame);
    if (!header) {
      this.stray(sender, frame);
      sender.link.send({ type: 'error', error: { code: 'INVALID_ARGUMENT', kind: 'Request', message: 'a binary frame must be a stream chunk', reason: 'bad-chunk' } });
      return;
    }
    const stream = this.streams.get(header.streamId);
    if (!stream || stream.sender !== sender) {
      this.stray(sender, frame);
      sender.link.send({ type: 'error', error: { code: 'NOT_FOUND', kind: 'Request', message: `no open stream ${header.streamId} of yours`, reason: 'unknown-stream' } });
      return;
    }
    const bytes = frame.length - CHUNK_HEADER_BYTES;
    const problem =
      header.seq !== stream.nextSeq ? `chunk ${header.seq} arrived where ${stream.nextSeq} was due`
      : header.seq > stream.acked + this.limits.streamWindow ? `chunk ${header.seq} is more than ${this.limits.streamWindow} past the last acknowledgement (${stream.acked}): wait for stream.ack`
      : bytes > this.limits.streamChunkBytes ? `a chunk carries at most ${this.limits.streamChunkBytes} bytes`
      : bytes === 0 ? 'a chunk carries at least one byte'
      : stream.received + bytes > stream.size ? 'more bytes than the stream announced'
      : null;
    if (problem) {
      this.abort(stream, { code: 'INVALID_ARGUMENT', kind: 'Request', message: problem, reason: 'bad-chunk' }, true);
      this.stray(sender, frame);
      return;
    }
    stream.received += bytes;
    stream.nextSeq++;
    stream.activeAt = performance.now();
    // a recipient this far behind is dropped from the stream before it could be cut as a slow
    // consumer: eight streams aimed at a member on a slow link, each a window ahead, reached the cut
    const dropAt = this.limits.maxBufferedBytes / 2;
    for (const m of stream.recipients) {
      if (m.link.bufferedAmount + frame.length > dropAt) this.drop(stream, m);
      else m.link.sendBinary(frame);
    }
    // the relay reads every byte even when nobody is left to receive it: that is paid for too
    sender.fanout.spend(frame.length, stream.recipients.size);
    stream.unacked = header.seq;
    if (!stream.ackTimer) this.acknowledge(stream);
  }

  /**
   * A binary frame no stream took was read all the same: it is paid for like a forwarded one,
   * and while its sender owes, the relay reads no more of its binary frames (the frame gate).
   */
  private stray(sender: Member, frame: Buffer): void {
    sender.fanout.spend(frame.length, 1);
  }

  /**
   * Acknowledge to the sender once every recipient has room; one that stays full past
   * `STREAM_LAG_MS` (a slow link, or a peer that stopped reading) is dropped from this stream,
   * with a `stream.abort` of its own, so it cannot stall the stream for everyone else.
   */
  private acknowledge(stream: OpenStream): void {
    stream.ackTimer = null;
    if (!this.streams.has(stream.id) || stream.unacked < 0) return;
    // the sender's fan-out debt (chunk bytes times recipients) is paid before it may send more
    const debt = stream.sender.fanout.msUntilToken(0);
    if (debt > 0) {
      stream.ackTimer = setTimeout(() => this.acknowledge(stream), Math.ceil(debt));
      return;
    }
    const now = performance.now();
    let waiting = false;
    for (const m of stream.recipients) {
      if (m.link.bufferedAmount <= this.limits.streamHighWater) {
        stream.lagging.delete(m);
        continue;
      }
      const since = stream.lagging.get(m) ?? now;
      if (now - since < STREAM_LAG_MS) {
        stream.lagging.set(m, since);
        waiting = true;
        continue;
      }
      this.drop(stream, m);
    }
    if (waiting) {
      stream.ackTimer = setTimeout(() => this.acknowledge(stream), ACK_RETRY_MS);
      return;
    }
    stream.sender.link.send({ type: 'event', name: 'stream.ack', data: { streamId: stream.id, seq: stream.unacked } });
    stream.acked = stream.unacked;
    stream.unacked = -1;
  }

  /** A recipient that is not keeping up goes on without this stream; the others do not wait for it. */
  private drop(stream: OpenStream, m: Member): void {
    stream.recipients.delete(m);
    stream.lagging.delete(m);
    const error: WireError = { code: 'TIMEOUT', kind: 'Network', message: 'you did not keep up with this stream: it went on without you', reason: 'slow-recipient' };
    m.link.send({ type: 'event', name: 'stream.abort', data: { streamId: stream.id, error } });
  }

  /** A recipient wants no more of a stream (it stopped reading it): nothing more is sent to it. */
  leave(member: Member, streamId: number): void {
    const stream = this.streams.get(streamId);
    if (!stream) return;
    stream.recipients.delete(member);
    stream.lagging.delete(member);
  }

  private get idleMs(): number {
    return this.limits.streamIdleMs ?? STREAM_IDLE_MS;
  }

  /** Streams that carried nothing for the idle time end, for everyone. */
  private abortIdle(): void {
    const now = performance.now();
    for (const stream of [...this.streams.values()]) {
      if (now - stream.activeAt < this.idleMs) continue;
      this.abort(stream, { code: 'TIMEOUT', kind: 'Network', message: `the stream carried nothing for ${this.idleMs / 1000} s`, reason: 'stream-idle' }, true);
    }
    if (this.streams.size === 0 && this.idleTimer) {
      clearInterval(this.idleTimer);
      this.idleTimer = null;
    }
  }

  close(sender: Member, streamId: number): void {
    const stream = this.streams.get(streamId);
    if (!stream || stream.sender !== sender) throw new RelayError('NOT_FOUND', `no open stream ${streamId} of yours`, 'unknown-stream');
    if (stream.received !== stream.size) {
      const error: WireError = { code: 'INVALID_ARGUMENT', kind: 'Request', message: `the stream ended after ${stream.received} of ${stream.size} bytes`, reason: 'stream-incomplete' };
      this.abort(stream, error, false);
      throw new RelayError(error.code, error.message, error.reason);
    }
    this.forget(stream);
    const data = serialise({ type: 'event', name: 'stream.end', data: { streamId } });
    for (const m of stream.recipients) m.link.sendRaw(data);
    sender.fanout.spend(data.length, stream.recipients.size);
  }

  /** A member left: its streams end in an error for their recipients; it receives no more. */
  memberLeft(member: Member): void {
    for (const stream of [...this.streams.values()]) {
      if (stream.sender === member) {
        this.abort(stream, { code: 'CONNECTION_LOST', kind: 'Network', message: 'the sender left before the stream ended', reason: 'sender-left' }, false);
      } else {
        stream.recipients.delete(member);
        stream.lagging.delete(member);
      }
    }
  }

  private abort(stream: OpenStream, error: WireError, tellSender: boolean): void {
    this.forget(stream);
    const data = serialise({ type: 'event', name: 'stream.abort', data: { streamId: stream.id, error } });
    for (const m of stream.recipients) m.link.sendRaw(data);
    stream.sender.fanout.spend(data.length, stream.recipients.size);
    if (tellSender) stream.sender.link.sendRaw(data);
  }

  private forget(stream: OpenStream): void {
    if (stream.ackTimer) clearTimeout(stream.ackTimer);
    stream.ackTimer = null;
    this.streams.delete(stream.id);
  }

  dispose(): void {
    this.disposed = true;
    if (this.idleTimer) clearInterval(this.idleTimer);
    this.idleTimer = null;
    for (const stream of this.streams.values()) if (stream.ackTimer) clearTimeout(stream.ackTimer);
    this.streams.clear();
  }
}
