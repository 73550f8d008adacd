import { decodeChunkHeader, CHUNK_HEADER_BYTES, type ServerFrame, type StreamInfo, type StreamOpenParams, type WireError } from '../../src/protocol/messages.ts';
import { Budget } from '../budget.ts';
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

const UNCOUNTED = new Budget(Infinity);

/** Streams one sender may have open at once. */
export const MAX_OPEN_STREAMS = 8;
/**
 * Recipients one sender may name (`to`) across its open streams together. Each is an entry the
 * relay holds for the stream's life (a stream that carries a byte a minute lives for ever): eight
 * streams to a thousand members each, from a thousand members of one token, held 215 MB that no
 * budget counted. The relay's own total is `--max-stream-recipients-total`.
 */
export const MAX_NAMED_RECIPIENTS = 1000;
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
  /**
   * Who receives it. Named (`to`): those members, as a set. Room-wide: every member that can
   * receive data and arrived before the stream opened (`arrival` below `before`), less `gone`,
   * read from the room as each chunk goes: a set of the room's members for every stream held
   * 10,000 members × 2,400 streams, 751 MB, that no budget counted.
   */
  readonly named: Set<Member> | null;
  readonly before: number;
  /** Members of a room-wide stream that are sent no more of it (dropped, left it, or over the soft limit when it opened). */
  readonly gone: WeakSet<Member>;
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
  /**
   * Recipients left over the high-water mark by a chunk, and since when (NaN: not yet seen over
   * it by an acknowledgement check): only they can hold an
   * acknowledgement back, so a retry looks at them, not at the room (every 5 ms for a second,
   * a room of 10,000 was 2 million looks per stream for one slow member).
   */
  readonly lagging: Map<Member, number>;
  /**
   * A room-wide stream a chunk found no recipient for: none can come (those who arrive later are
   * not its recipients), so the next chunks do not walk the room for it.
   */
  noneLeft: boolean;
}

/**
 * Members a room-wide stream's chunk walks in the room (looking for its recipients) that count
 * as one copy of it on its sender's fan-out budget. A walk of 10,000 members, most of them gone
 * from the stream (an SDK with no `stream` listener leaves every one), cost 0.6 ms a chunk and was
 * charged as the few copies sent; a step is about 50 ns against a copy's 10 µs or more.
 */
export const WALKED_PER_COPY = 64;

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
  /** Each sender's open streams, and each member's named streams: a departure costs its own, not the room's. */
  private readonly bySender = new Map<Member, Set<OpenStream>>();
  private readonly byName = new Map<Member, Set<OpenStream>>();
  /** When each member arrived, in the order of {@link arrived}; one not seen is as old as the board. */
  private readonly arrivals = new WeakMap<Member, number>();
  private arrivalCount = 0;
  /** Members the last {@link each} walked (0 for a named stream's recipients). */
  private walkedLast = 0;
  private nextId = 1;
  private disposed = false;
  private idleTimer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly limits: StreamLimits,
    private readonly members: () => Iterable<Member>,
    private readonly lookup: (participantId: string) => Member | undefined,
    private readonly timeline: Timeline,
    /** Where a sender's named recipients are counted (`--max-stream-recipients-total`; a domain-wide token's, in its project's half). */
    private readonly recipients: (sender: Member) => Budget = () => UNCOUNTED,
  ) {}

  open(sender: Member, params: StreamOpenParams): { streamId: number; chunkBytes: number; window: number } {
    if (this.disposed) throw new RelayError('ROOM_ENDED', 'the room has ended', 'room-ended');
    if (!sender.fanout.hasCredit()) throw new RelayError('RATE_LIMITED', 'what you sent recently is still being delivered to many members: slow down', 'fanout-rate');
    if (params.size > this.limits.maxStreamBytes) {
      throw new RelayError('PAYLOAD_TOO_LARGE', `a data stream may carry at most ${this.limits.maxStreamBytes} bytes`, 'stream-too-large');
    }
    if ((this.bySender.get(sender)?.size ?? 0) >= MAX_OPEN_STREAMS) throw new RelayError('RATE_LIMITED', `at most ${MAX_OPEN_STREAMS} streams open at once`, 'too-many-streams');
    const id = this.nextId++;
    const named = params.to ? new Set<Member>() : null;
    const stream: OpenStream = { id, sender, named, before: this.arrivalCount + 1, gone: new WeakSet(), size: params.size, received: 0, nextSeq: 0, unacked: -1, acked: -1, ackTimer: null, activeAt: performance.now(), lagging: new Map(), noneLeft: false };
    // a member that is not keeping up misses new streams, like pubsub: opens cannot be aimed at it to get it cut
    const fits = (m: Member) => m !== sender && m.grant.canSubscribeData && m.link.bufferedAmount <= this.limits.sendSoftLimitBytes;
    if (named) {
      for (const pid of params.to!) {
        const m = this.lookup(pid);
        if (m && fits(m)) named.add(m);
      }
      let held = 0;
      for (const open of this.bySender.get(sender) ?? []) held += open.named?.size ?? 0;
      if (held + named.size > MAX_NAMED_RECIPIENTS) {
        throw new RelayError('RATE_LIMITED', `your open streams may name at most ${MAX_NAMED_RECIPIENTS} recipients together (${held} named now): close one, or stream to the room`, 'too-many-streams');
      }
      if (!this.recipients(sender).take(named.size)) throw new RelayError('RATE_LIMITED', 'the relay holds all the named stream recipients it can: try again later, or stream to the room', 'streams-full');
      for (const m of named) index(this.byName, m).add(stream);
    } else {
      for (const m of this.members()) if (m !== sender && m.grant.canSubscribeData && !fits(m)) stream.gone.add(m);
    }
    this.streams.set(id, stream);
    index(this.bySender, sender).add(stream);
    if (!this.idleTimer) {
      // looked at a dozen times per idle time: a stream ends at most a twelfth of it late
      this.idleTimer = setInterval(() => this.abortIdle(), Math.max(10, this.idleMs / 12));
      this.idleTimer.unref();
    }
    const { to: _to, ...meta } = params;
    const info: StreamInfo = { ...meta, streamId: id, from: sender.id, timestamp: Date.now() };
    const data = serialise({ type: 'event', name: 'stream.open', data: info });
    const told = this.each(stream, (m) => m.link.sendRaw(data));
    // the announcement is a fan-out like any other (a name and a type of 256 characters each, to a thousand members)
    sender.fanout.spend(data.length, this.charged(told));
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
    const highWater = this.limits.streamHighWater;
    const sent = this.each(stream, (m) => {
      const unsent = m.link.bufferedAmount;
      if (unsent + frame.length > dropAt) {
        this.drop(stream, m);
        return false;
      }
      m.link.sendBinary(frame);
      // its clock starts at the first acknowledgement check that finds it still over (NaN until then)
      if (unsent + frame.length > highWater) {
        if (!stream.lagging.has(m)) stream.lagging.set(m, Number.NaN);
      } else if (stream.lagging.size > 0) stream.lagging.delete(m);
    });
    if (sent === 0 && !stream.named) stream.noneLeft = true;
    // the relay reads every byte even when nobody is left to receive it, and looked through the
    // room for its recipients: that is paid for too
    sender.fanout.spend(frame.length, this.charged(sent));
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
    for (const [m, since] of [...stream.lagging]) {
      if (!this.receives(stream, m) || m.link.bufferedAmount <= this.limits.streamHighWater) stream.lagging.delete(m);
      else if (Number.isNaN(since)) {
        stream.lagging.set(m, now);
        waiting = true;
      } else if (now - since < STREAM_LAG_MS) waiting = true;
      else this.drop(stream, m);
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
    this.without(stream, m);
    const error: WireError = { code: 'TIMEOUT', kind: 'Network', message: 'you did not keep up with this stream: it went on without you', reason: 'slow-recipient' };
    m.link.send({ type: 'event', name: 'stream.abort', data: { streamId: stream.id, error } });
  }

  /** A recipient wants no more of a stream (it stopped reading it): nothing more is sent to it. */
  leave(member: Member, streamId: number): void {
    const stream = this.streams.get(streamId);
    if (!stream) return;
    this.without(stream, member);
  }

  /** `member` arrived in the room: streams already open are not for it (it was not told of them). */
  arrived(member: Member): void {
    this.arrivals.set(member, ++this.arrivalCount);
  }

  /** Whether `m` receives `stream` (see {@link OpenStream.named}). */
  private receives(stream: OpenStream, m: Member): boolean {
    if (stream.named) return stream.named.has(m);
    return m !== stream.sender && m.grant.canSubscribeData && (this.arrivals.get(m) ?? 0) < stream.before && !stream.gone.has(m);
  }

  /**
   * Call `fn` for each recipient of `stream`; returns how many there were, less those `fn`
   * returned false for. For a room-wide stream the room's members are walked: how many is
   * {@link walkedLast} until the next call.
   */
  private each(stream: OpenStream, fn: (m: Member) => boolean | void): number {
    let n = 0;
    this.walkedLast = 0;
    if (stream.named) {
      for (const m of [...stream.named]) if (fn(m) !== false) n++;
      return n;
    }
    if (stream.noneLeft) return 0;
    let walked = 0;
    for (const m of this.members()) {
      walked++;
      if (this.receives(stream, m) && fn(m) !== false) n++;
    }
    this.walkedLast = walked;
    return n;
  }

  /** The copies a send through {@link each} is charged: those sent, or a copy for each {@link WALKED_PER_COPY} members it walked. */
  private charged(sent: number): number {
    return Math.max(sent, Math.ceil(this.walkedLast / WALKED_PER_COPY));
  }

  /** `m` is sent no more of `stream`. */
  private without(stream: OpenStream, m: Member): void {
    stream.lagging.delete(m);
    if (!stream.named) return void stream.gone.add(m);
    if (stream.named.delete(m)) this.recipients(stream.sender).give(1);
    unindex(this.byName, m, stream);
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
    const data = serialise({ type: 'event', name: 'stream.end', data: { streamId } });
    const told = this.each(stream, (m) => m.link.sendRaw(data));
    this.forget(stream);
    sender.fanout.spend(data.length, this.charged(told));
  }

  /**
   * A member left (or resumed: its streams belonged to the old connection): its streams end in
   * an error for their recipients, and it receives no more of the others. Costs its own streams,
   * not the room's.
   */
  memberLeft(member: Member): void {
    for (const stream of [...(this.bySender.get(member) ?? [])]) {
      this.abort(stream, { code: 'CONNECTION_LOST', kind: 'Network', message: 'the sender left before the stream ended', reason: 'sender-left' }, false);
    }
    for (const stream of [...(this.byName.get(member) ?? [])]) this.without(stream, member);
    // room-wide streams open now were announced to the connection that went
    this.arrived(member);
  }

  private abort(stream: OpenStream, error: WireError, tellSender: boolean): void {
    const data = serialise({ type: 'event', name: 'stream.abort', data: { streamId: stream.id, error } });
    const told = this.each(stream, (m) => m.link.sendRaw(data));
    this.forget(stream);
    stream.sender.fanout.spend(data.length, this.charged(told));
    if (tellSender) stream.sender.link.sendRaw(data);
  }

  private forget(stream: OpenStream): void {
    if (stream.ackTimer) clearTimeout(stream.ackTimer);
    stream.ackTimer = null;
    this.streams.delete(stream.id);
    unindex(this.bySender, stream.sender, stream);
    if (stream.named) {
      for (const m of stream.named) unindex(this.byName, m, stream);
      this.recipients(stream.sender).give(stream.named.size);
      stream.named.clear();
    }
  }

  dispose(): void {
    this.disposed = true;
    if (this.idleTimer) clearInterval(this.idleTimer);
    this.idleTimer = null;
    for (const stream of this.streams.values()) {
      if (stream.ackTimer) clearTimeout(stream.ackTimer);
      if (stream.named) {
        this.recipients(stream.sender).give(stream.named.size);
        stream.named.clear();
      }
    }
    this.streams.clear();
    this.bySender.clear();
    this.byName.clear();
  }
}

function index(map: Map<Member, Set<OpenStream>>, m: Member): Set<OpenStream> {
  let set = map.get(m);
  if (!set) map.set(m, (set = new Set()));
  return set;
}

function unindex(map: Map<Member, Set<OpenStream>>, m: Member, stream: OpenStream): void {
  const set = map.get(m);
  if (!set) return;
  set.delete(stream);
  if (set.size === 0) map.delete(m);
}
