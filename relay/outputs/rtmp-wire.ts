/**
 * The bytes of RTMP: AMF0 values and the chunk stream, both directions.
 *
 * Whatever is read here comes from a server anybody can name (`livestream.start({ url })`), so
 * every reader is total: each read is checked against the bytes present, every count and length
 * against what is left and against a limit, and malformed input ends in `RtmpProtocolError` —
 * never in a `RangeError`, a huge allocation or a loop. The publisher turns that error into a
 * failed output; nothing reaches the socket's event handlers.
 */

/** Thrown by the readers for input that breaks the protocol or a limit. */
export class RtmpProtocolError extends Error {
  override readonly name = 'RtmpProtocolError';
}

/** What the readers hold and accept at most. A publisher receives only small control messages. */
export const RTMP_LIMITS = Object.freeze({
  /** Largest message accepted from the server (the header allows 16 MiB). */
  maxMessageBytes: 64 * 1024,
  /** Unparsed bytes plus partly received messages, all chunk streams together. */
  maxBufferedBytes: 1024 * 1024,
  /** Chunk streams the server may open. */
  maxChunkStreams: 32,
  /** Nesting of AMF0 objects and arrays. */
  maxAmfDepth: 32,
  /** Values in one AMF0 message, nested ones included. */
  maxAmfValues: 10_000,
});

// ---- AMF0 -----------------------------------------------------------------------------

/** An AMF0 value as this module reads and writes it. */
export type Amf = number | boolean | string | null | undefined | { [key: string]: Amf } | Amf[];

/** Encode values as AMF0 (numbers, booleans, strings, null, undefined, objects, strict arrays). */
export function amfEncode(values: Amf[]): Buffer {
  const parts: Buffer[] = [];
  const str = (s: string) => {
    const b = Buffer.from(s, 'utf8');
    const len = Buffer.alloc(2);
    len.writeUInt16BE(Math.min(b.length, 0xffff));
    return Buffer.concat([len, b.subarray(0, 0xffff)]);
  };
  const one = (v: Amf): void => {
    if (typeof v === 'number') {
      const b = Buffer.alloc(9);
      b.writeDoubleBE(v, 1);
      parts.push(b);
    } else if (typeof v === 'boolean') parts.push(Buffer.from([0x01, v ? 1 : 0]));
    else if (typeof v === 'string') parts.push(Buffer.from([0x02]), str(v));
    else if (v === null) parts.push(Buffer.from([0x05]));
    else if (v === undefined) parts.push(Buffer.from([0x06]));
    else if (Array.isArray(v)) {
      const head = Buffer.alloc(5);
      head[0] = 0x0a;
      head.writeUInt32BE(v.length, 1);
      parts.push(head);
      v.forEach(one);
    } else {
      parts.push(Buffer.from([0x03]));
      for (const [k, val] of Object.entries(v)) {
        parts.push(str(k));
        one(val);
      }
      parts.push(Buffer.from([0x00, 0x00, 0x09]));
    }
  };
  values.forEach(one);
  return Buffer.concat(parts);
}

/**
 * Decode AMF0 values. Throws `RtmpProtocolError` for truncated input, unknown or unsupported
 * types, counts larger than the bytes left, and nesting or value counts over `RTMP_LIMITS`.
 */
export function amfDecode(buf: Uint8Array, limits: Pick<typeof RTMP_LIMITS, 'maxAmfDepth' | 'maxAmfValues'> = RTMP_LIMITS): Amf[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = 0;
  let values = 0;
  const need = (n: number) => {
    if (n > b.length - o) throw new RtmpProtocolError('truncated AMF0 value');
  };
  const u16 = () => {
    need(2);
    o += 2;
    return b.readUInt16BE(o - 2);
  };
  const u32 = () => {
    need(4);
    o += 4;
    return b.readUInt32BE(o - 4);
  };
  const f64 = () => {
    need(8);
    o += 8;
    return b.readDoubleBE(o - 8);
  };
  const utf8 = (n: number) => {
    need(n);
    o += n;
    return b.toString('utf8', o - n, o);
  };
  const props = (depth: number): { [key: string]: Amf } => {
    const obj: { [key: string]: Amf } = {};
    for (;;) {
      const key = utf8(u16());
      need(1);
      if (key === '' && b[o] === 0x09) {
        o++;
        return obj;
      }
      // defineProperty: a key "__proto__" is data, not the object's prototype
      Object.defineProperty(obj, key, { value: one(depth + 1), enumerable: true, writable: true, configurable: true });
    }
  };
  const one = (depth: number): Amf => {
    if (depth > limits.maxAmfDepth) throw new RtmpProtocolError('AMF0 values nested too deep');
    if (++values > limits.maxAmfValues) throw new RtmpProtocolError('too many AMF0 values');
    need(1);
    const type = b[o++];
    switch (type) {
      case 0x00:
        return f64();
      case 0x01:
        need(1);
        return b[o++] !== 0;
      case 0x02:
        return utf8(u16());
      case 0x03:
        return props(depth);
      case 0x05:
        return null;
      case 0x06:
        return undefined;
      case 0x08:
        u32(); // the associative count is a hint; the end marker decides
        return props(depth);
      case 0x0a: {
        const n = u32();
        // every element takes at least one byte: a count beyond the bytes left is a lie
        if (n > b.length - o) throw new RtmpProtocolError('AMF0 array longer than its message');
        const arr: Amf[] = [];
        for (let i = 0; i < n; i++) arr.push(one(depth + 1));
        return arr;
      }
      case 0x0b: {
        const ms = f64();
        u16(); // time zone, unused by AMF0 writers
        return ms;
      }
      case 0x0c:
      case 0x0f:
        return utf8(u32());
      default:
        throw new RtmpProtocolError('unsupported AMF0 type');
    }
  };
  const out: Amf[] = [];
  while (o < b.length) out.push(one(0));
  return out;
}

// ---- chunk stream ---------------------------------------------------------------------

/** The RTMP message types this client uses or understands. */
export const MessageType = { SetChunkSize: 1, Abort: 2, Ack: 3, UserControl: 4, WindowAckSize: 5, SetPeerBandwidth: 6, Data: 18, Command: 20 } as const;

/** One reassembled RTMP message. */
export interface RtmpMessage {
  typeId: number;
  streamId: number;
  timestamp: number;
  payload: Buffer;
}

/**
 * Serialise a message as chunks of `chunkSize` on chunk stream `csid` (2–63): a type 0 header,
 * then type 3 headers, with the extended timestamp field when the timestamp needs it.
 */
export function writeChunks(message: RtmpMessage, csid: number, chunkSize: number): Buffer {
  if (!Number.isInteger(csid) || csid < 2 || csid > 63) throw new RangeError('csid must be 2..63');
  const extended = message.timestamp >= 0xffffff;
  const ext = Buffer.alloc(extended ? 4 : 0);
  if (extended) ext.writeUInt32BE(message.timestamp % 2 ** 32);
  const header = Buffer.alloc(12);
  header[0] = csid;
  header.writeUIntBE(extended ? 0xffffff : message.timestamp, 1, 3);
  header.writeUIntBE(message.payload.length, 4, 3);
  header[7] = message.typeId;
  header.writeUInt32LE(message.streamId, 8);
  const parts: Buffer[] = [header, ext];
  for (let o = 0; o < message.payload.length; o += chunkSize) {
    if (o > 0) parts.push(Buffer.from([0xc0 | csid]), ext);
    parts.push(message.payload.subarray(o, o + chunkSize));
  }
  return Buffer.concat(parts);
}

interface ChunkStream {
  timestamp: number;
  delta: number;
  length: number;
  typeId: number;
  streamId: number;
  /** Whether the last header carried an extended timestamp (type 3 chunks then carry it too). */
  extended: boolean;
  /** The message being received on this chunk stream, if any. */
  body: Buffer | null;
  received: number;
}

/**
 * Reassembles messages from an incoming chunk stream. `push` throws `RtmpProtocolError` on a
 * violation (and on every later call): a type 1–3 header on a chunk stream never opened with a
 * type 0, a chunk size of 0 (or with the top bit set), a message over `maxMessageBytes`, more
 * than `maxChunkStreams` chunk streams, more than `maxBufferedBytes` held. Memory held is at
 * most one chunk of unparsed bytes plus the partly received messages, which the budget bounds.
 */
export class ChunkReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes the next chunk needs before parsing is worth trying again (no re-parse per byte). */
  private want = 1;
  private held = 0;
  private readonly streams = new Map<number, ChunkStream>();
  private broken: RtmpProtocolError | null = null;
  /** The peer's chunk size (Set Chunk Size). */
  chunkSize = 128;

  constructor(
    private readonly onMessage: (message: RtmpMessage) => void,
    private readonly limits: Pick<typeof RTMP_LIMITS, 'maxMessageBytes' | 'maxBufferedBytes' | 'maxChunkStreams'> = RTMP_LIMITS,
  ) {}

  /** Bytes held now: unparsed input plus partly received messages. */
  get buffered(): number {
    return this.pendingBytes + this.held;
  }

  push(data: Buffer): void {
    if (this.broken) throw this.broken;
    try {
      this.pending.push(data);
      this.pendingBytes += data.length;
      if (this.buffered > this.limits.maxBufferedBytes) throw new RtmpProtocolError('the server sent more than the buffer holds');
      if (this.pendingBytes < this.want) return;
      let b = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
      this.pending = [];
      this.pendingBytes = 0;
      this.want = 1;
      for (let used = this.readChunk(b); used > 0; used = this.readChunk(b)) b = b.subarray(used);
      if (b.length) {
        // a copy, so that a few leftover bytes do not keep a large socket buffer alive
        this.pending = [Buffer.from(b)];
        this.pendingBytes = b.length;
      }
    } catch (err) {
      this.broken = err instanceof RtmpProtocolError ? err : new RtmpProtocolError('malformed chunk stream');
      this.pending = [];
      this.streams.clear();
      throw this.broken;
    }
  }

  /** Read one chunk from the front of `b`: the bytes it took, or 0 if it is not all there yet. */
  private readChunk(b: Buffer): number {
    if (b.length < 1) return 0;
    const fmt = b[0]! >> 6;
    let csid = b[0]! & 0x3f;
    let o = 1;
    if (csid === 0) {
      if (b.length < 2) return this.wait(2);
      csid = 64 + b[1]!;
      o = 2;
    } else if (csid === 1) {
      if (b.length < 3) return this.wait(3);
      csid = 64 + b[1]! + b[2]! * 256;
      o = 3;
    }
    const headerBytes = [11, 7, 3, 0][fmt]!;
    if (b.length < o + headerBytes) return this.wait(o + headerBytes);
    const prev = this.streams.get(csid);
    if (!prev && fmt !== 0) throw new RtmpProtocolError('a chunk stream must open with a full header');
    if (!prev && this.streams.size >= this.limits.maxChunkStreams) throw new RtmpProtocolError('too many chunk streams');
    // read the header into locals: nothing changes until the whole chunk is here
    const tsField = fmt <= 2 ? b.readUIntBE(o, 3) : 0;
    const extended = fmt <= 2 ? tsField === 0xffffff : prev!.extended;
    const length = fmt <= 1 ? b.readUIntBE(o + 3, 3) : prev!.length;
    const typeId = fmt <= 1 ? b[o + 6]! : prev!.typeId;
    const streamId = fmt === 0 ? b.readUInt32LE(o + 7) : prev!.streamId;
    o += headerBytes;
    let ts = tsField;
    if (extended) {
      if (b.length < o + 4) return this.wait(o + 4);
      ts = b.readUInt32BE(o);
      o += 4;
    }
    if (length > this.limits.maxMessageBytes) throw new RtmpProtocolError('message larger than accepted');
    const continuing = fmt === 3 && prev!.body !== null;
    const received = continuing ? prev!.received : 0;
    const take = Math.min(this.chunkSize, length - received);
    if (b.length < o + take) return this.wait(o + take);

    const cs: ChunkStream = prev ?? { timestamp: 0, delta: 0, length: 0, typeId: 0, streamId: 0, extended: false, body: null, received: 0 };
    if (!continuing) {
      if (cs.body) this.held -= cs.length; // a new header abandons the message in progress
      const delta = fmt === 0 ? 0 : fmt === 3 ? cs.delta : ts;
      cs.timestamp = fmt === 0 ? ts : (cs.timestamp + delta) % 2 ** 32;
      Object.assign(cs, { delta, length, typeId, streamId, extended, received: 0 });
      if (this.held + length + this.pendingBytes > this.limits.maxBufferedBytes) throw new RtmpProtocolError('the server sent more than the buffer holds');
      cs.body = Buffer.alloc(length);
      this.held += length;
      this.streams.set(csid, cs);
    }
    b.copy(cs.body!, cs.received, o, o + take);
    cs.received += take;
    if (cs.received === cs.length) {
      const payload = cs.body!;
      cs.body = null;
      this.held -= cs.length;
      this.control(cs.typeId, payload);
      this.onMessage({ typeId: cs.typeId, streamId: cs.streamId, timestamp: cs.timestamp, payload });
    }
    return o + take;
  }

  /** Protocol control messages that change how the reader reads. */
  private control(typeId: number, payload: Buffer): void {
    if (typeId === MessageType.SetChunkSize) {
      if (payload.length < 4) throw new RtmpProtocolError('short Set Chunk Size');
      const size = payload.readUInt32BE(0);
      // 1..2^31-1; a size of 0 would make chunks that carry nothing
      if (size === 0 || size > 0x7fffffff) throw new RtmpProtocolError('invalid chunk size');
      this.chunkSize = size;
    } else if (typeId === MessageType.Abort && payload.length >= 4) {
      const cs = this.streams.get(payload.readUInt32BE(0));
      if (cs?.body) {
        this.held -= cs.length;
        cs.body = null;
      }
    }
  }

  private wait(bytes: number): 0 {
    this.want = bytes;
    return 0;
  }
}
