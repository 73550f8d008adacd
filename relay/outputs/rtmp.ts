/**
 * Just enough RTMP to publish: AMF0 values, the chunk stream (both directions), the simple
 * handshake, and a publisher (connect → createStream → publish → data messages).
 * The test suite's RTMP listener is built from the same pieces.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

// ---- AMF0 -----------------------------------------------------------------------------

export type Amf = number | boolean | string | null | undefined | { [key: string]: Amf } | Amf[];

export function amfEncode(values: Amf[]): Buffer {
  const parts: Buffer[] = [];
  const str = (s: string) => {
    const b = Buffer.from(s, 'utf8');
    const len = Buffer.alloc(2);
    len.writeUInt16BE(b.length);
    return Buffer.concat([len, b]);
  };
  const one = (v: Amf): void => {
    if (typeof v === 'number') {
      const b = Buffer.alloc(9);
      b[0] = 0x00;
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

export function amfDecode(buf: Buffer<ArrayBufferLike>): Amf[] {
  let o = 0;
  const str = () => {
    const n = buf.readUInt16BE(o);
    o += 2;
    const s = buf.toString('utf8', o, o + n);
    o += n;
    return s;
  };
  const props = (): { [key: string]: Amf } => {
    const obj: { [key: string]: Amf } = {};
    for (;;) {
      const key = str();
      if (buf[o] === 0x09) {
        o++;
        return obj;
      }
      obj[key] = one();
    }
  };
  const one = (): Amf => {
    const type = buf[o++];
    switch (type) {
      case 0x00: {
        const v = buf.readDoubleBE(o);
        o += 8;
        return v;
      }
      case 0x01:
        return buf[o++] !== 0;
      case 0x02:
        return str();
      case 0x03:
        return props();
      case 0x05:
        return null;
      case 0x06:
        return undefined;
      case 0x08:
        o += 4;
        return props();
      case 0x0a: {
        const n = buf.readUInt32BE(o);
        o += 4;
        return Array.from({ length: n }, one);
      }
      default:
        throw new Error(`unsupported AMF0 type 0x${(type ?? 0).toString(16)}`);
    }
  };
  const out: Amf[] = [];
  while (o < buf.length) out.push(one());
  return out;
}

// ---- chunk stream ---------------------------------------------------------------------

export const MessageType = { SetChunkSize: 1, Ack: 3, UserControl: 4, WindowAckSize: 5, SetPeerBandwidth: 6, Data: 18, Command: 20 } as const;

export interface RtmpMessage {
  typeId: number;
  streamId: number;
  timestamp: number;
  payload: Buffer<ArrayBufferLike>;
}

/** Serialise a message as chunks of `chunkSize` on chunk stream `csid` (type 0, then type 3). */
export function writeChunks(message: RtmpMessage, csid: number, chunkSize: number): Buffer<ArrayBufferLike> {
  const header = Buffer.alloc(12);
  header[0] = csid & 0x3f;
  header.writeUIntBE(Math.min(message.timestamp, 0xffffff), 1, 3);
  header.writeUIntBE(message.payload.length, 4, 3);
  header[7] = message.typeId;
  header.writeUInt32LE(message.streamId, 8);
  const parts: Buffer<ArrayBufferLike>[] = [header];
  for (let o = 0; o < message.payload.length; o += chunkSize) {
    if (o > 0) parts.push(Buffer.from([0xc0 | (csid & 0x3f)]));
    parts.push(message.payload.subarray(o, o + chunkSize));
  }
  return Buffer.concat(parts);
}

interface ChunkState {
  timestamp: number;
  length: number;
  typeId: number;
  streamId: number;
  body: Buffer<ArrayBufferLike>[];
  received: number;
}

/** Reassembles messages from an incoming chunk stream. */
export class ChunkReader {
  private buffer: Buffer = Buffer.alloc(0);
  private readonly streams = new Map<number, ChunkState>();
  chunkSize = 128;

  constructor(private readonly onMessage: (message: RtmpMessage) => void) {}

  push(data: Buffer): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, data]) : data;
    while (this.readChunk());
  }

  private readChunk(): boolean {
    const b = this.buffer;
    if (b.length < 1) return false;
    const fmt = b[0]! >> 6;
    let csid = b[0]! & 0x3f;
    let o = 1;
    if (csid === 0) {
      if (b.length < 2) return false;
      csid = 64 + b[1]!;
      o = 2;
    } else if (csid === 1) {
      if (b.length < 3) return false;
      csid = 64 + b[1]! + b[2]! * 256;
      o = 3;
    }
    const headerBytes = [11, 7, 3, 0][fmt]!;
    if (b.length < o + headerBytes) return false;
    const prev = this.streams.get(csid);
    const state: ChunkState = prev ? { ...prev } : { timestamp: 0, length: 0, typeId: 0, streamId: 0, body: [], received: 0 };
    if (fmt <= 2) {
      const ts = b.readUIntBE(o, 3);
      state.timestamp = fmt === 0 ? ts : state.timestamp + ts;
    }
    if (fmt <= 1) {
      state.length = b.readUIntBE(o + 3, 3);
      state.typeId = b[o + 6]!;
    }
    if (fmt === 0) state.streamId = b.readUInt32LE(o + 7);
    o += headerBytes;
    // a header other than type 3 starts a new message; type 3 continues one (or repeats the last header)
    if (fmt !== 3) {
      state.body = [];
      state.received = 0;
    }
    const take = Math.min(this.chunkSize, state.length - state.received);
    if (b.length < o + take) return false;
    state.body = [...state.body, b.subarray(o, o + take)];
    state.received += take;
    this.buffer = b.subarray(o + take);
    if (state.received >= state.length) {
      const payload = Buffer.concat(state.body);
      state.body = [];
      state.received = 0;
      this.streams.set(csid, state);
      if (state.typeId === MessageType.SetChunkSize) this.chunkSize = payload.readUInt32BE(0) & 0x7fffffff;
      this.onMessage({ typeId: state.typeId, streamId: state.streamId, timestamp: state.timestamp, payload });
    } else this.streams.set(csid, state);
    return true;
  }
}

// ---- publisher ------------------------------------------------------------------------

const OUT_CHUNK = 4096;

/** Splits `rtmp://host[:port]/app[/...]/streamKey` into what the protocol needs. */
export function parseRtmpUrl(url: string): { host: string; port: number; app: string; key: string; tcUrl: string } | null {
  const m = /^rtmp:\/\/([^/:]+)(?::(\d+))?\/(.+)\/([^/]+)$/.exec(url);
  if (!m) return null;
  const [, host, port, app, key] = m as unknown as [string, string, string | undefined, string, string];
  return { host, port: port ? Number(port) : 1935, app, key, tcUrl: `rtmp://${host}${port ? `:${port}` : ''}/${app}` };
}

/** Publishes one stream to an RTMP server. */
export class RtmpPublisher {
  private socket: Socket | null = null;
  private streamId = 0;
  private started = 0;
  private readonly waiting = new Map<number | string, (args: Amf[]) => void>();
  onClose: (error: Error | null) => void = () => {};

  async connect(url: string, timeoutMs = 5000): Promise<void> {
    const target = parseRtmpUrl(url);
    if (!target) throw new Error('the URL must look like rtmp://host[:port]/app/streamKey');
    const socket = connect({ host: target.host, port: target.port });
    this.socket = socket;
    const timer = setTimeout(() => socket.destroy(new Error(`no answer from ${target.host}:${target.port} within ${timeoutMs} ms`)), timeoutMs);
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('error', reject);
      });
      await this.handshake(socket);
      const reader = new ChunkReader((m) => this.onMessage(m));
      socket.on('data', (d: Buffer) => reader.push(d));
      socket.on('close', () => this.onClose(null));
      socket.on('error', (err) => this.onClose(err));
      this.write(MessageType.SetChunkSize, 0, (() => { const b = Buffer.alloc(4); b.writeUInt32BE(OUT_CHUNK); return b; })(), 2);
      await this.command(1, ['connect', 1, { app: target.app, type: 'nonprivate', flashVer: 'FMLE/3.0 (compatible; Tessera)', tcUrl: target.tcUrl }], 0);
      this.send(['releaseStream', 2, null, target.key], 0);
      this.send(['FCPublish', 3, null, target.key], 0);
      const created = await this.command(4, ['createStream', 4, null], 0);
      this.streamId = typeof created[3] === 'number' ? created[3] : 1;
      const status = this.wait('onStatus');
      this.send(['publish', 5, null, target.key, 'live'], this.streamId);
      const info = (await status)[3] as { code?: string } | undefined;
      if (info?.code !== 'NetStream.Publish.Start') throw new Error(`the server refused to publish: ${info?.code ?? 'no status'}`);
      this.started = Date.now();
    } catch (err) {
      socket.destroy();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Send a data message (`@setDataFrame`, `onTextData`, ...) on the published stream. */
  data(values: Amf[]): void {
    this.write(MessageType.Data, this.streamId, amfEncode(values), 4, Date.now() - this.started);
  }

  async close(): Promise<void> {
    const socket = this.socket;
    this.socket = null;
    if (!socket || socket.destroyed) return;
    this.onClose = () => {};
    this.send(['FCUnpublish', 6, null], 0);
    this.send(['deleteStream', 7, null, this.streamId], 0);
    await new Promise<void>((resolve) => socket.end(resolve));
  }

  private async handshake(socket: Socket): Promise<void> {
    const c1 = Buffer.concat([Buffer.alloc(8), randomBytes(1528)]);
    socket.write(Buffer.concat([Buffer.from([3]), c1]));
    const s = await readExactly(socket, 1 + 1536 + 1536);
    socket.write(s.subarray(1, 1537)); // C2 echoes S1
  }

  private onMessage(m: RtmpMessage): void {
    if (m.typeId !== MessageType.Command) return;
    const args = amfDecode(m.payload);
    const [name, txn] = args;
    const waiter = (name === '_result' || name === '_error') && typeof txn === 'number' ? this.waiting.get(txn) : typeof name === 'string' ? this.waiting.get(name) : undefined;
    if (!waiter) return;
    this.waiting.delete(name === '_result' || name === '_error' ? (txn as number) : (name as string));
    waiter(args);
  }

  private wait(key: number | string): Promise<Amf[]> {
    return new Promise((resolve) => this.waiting.set(key, resolve));
  }

  private async command(txn: number, values: Amf[], streamId: number): Promise<Amf[]> {
    const answer = this.wait(txn);
    this.send(values, streamId);
    const args = await answer;
    if (args[0] === '_error') throw new Error(`the server refused ${String(values[0])}`);
    return args;
  }

  private send(values: Amf[], streamId: number): void {
    this.write(MessageType.Command, streamId, amfEncode(values), streamId === 0 ? 3 : 4);
  }

  private write(typeId: number, streamId: number, payload: Buffer, csid: number, timestamp = 0): void {
    this.socket?.write(writeChunks({ typeId, streamId, timestamp, payload }, csid, OUT_CHUNK));
  }
}

/** Read exactly `n` bytes from a socket before it emits them as 'data'. */
export function readExactly(socket: Socket, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let got: Buffer = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (got.length >= n) {
        socket.off('data', onData);
        socket.off('error', reject);
        if (got.length > n) socket.unshift(got.subarray(n));
        resolve(got.subarray(0, n));
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}
