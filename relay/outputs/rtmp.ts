/**
 * Just enough RTMP to publish: the simple handshake, then connect → createStream → publish →
 * data messages, over TCP or TLS (`rtmps://`). The bytes are read by `rtmp-wire.ts`.
 *
 * The server is whoever the URL names, so this client assumes nothing of it: every wait
 * (TCP or TLS connect, handshake, each answer) ends when the socket closes or errors and when
 * the deadline passes; every byte the server sends goes through a bounded reader; anything
 * thrown while handling a socket event is caught at that boundary, where it destroys the socket
 * and fails the publish. Nothing the server says is repeated to the caller: failures are
 * `RtmpFailure`s whose messages this file wrote.
 */
import { randomBytes } from 'node:crypto';
import { connect as tcpConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { RtmpTarget } from './rtmp-target.ts';
import { amfDecode, amfEncode, ChunkReader, MessageType, writeChunks, type Amf, type RtmpMessage } from './rtmp-wire.ts';

/** Why a publish failed or ended: for the relay's log, in this file's words. */
export class RtmpFailure extends Error {
  override readonly name = 'RtmpFailure';
}

const OUT_CHUNK = 4096;
const HANDSHAKE_BYTES = 1 + 1536 + 1536; // S0, S1, S2
/** Unsent bytes the publisher lets pile up before it takes the server for one that stopped reading. */
const MAX_UNSENT = 1024 * 1024;
/** How long a clean close waits for the server before it simply drops the connection. */
const CLOSE_GRACE_MS = 1000;

type Phase = 'idle' | 'connecting' | 'handshake' | 'chunks' | 'published' | 'closed';

interface Waiter {
  resolve(args: Amf[]): void;
  reject(err: Error): void;
}

/** Publishes one stream to an RTMP server. One use: `publish`, then `data`, then `close`. */
export class RtmpPublisher {
  /** Called once if a published stream ends other than by `close()` (the server left or broke the protocol). */
  onClose: (error: Error) => void = () => {};
  private socket: Socket | null = null;
  private phase: Phase = 'idle';
  private streamId = 0;
  private started = 0;
  private handshake: Buffer[] = [];
  private handshakeBytes = 0;
  private readonly waiting = new Map<number | string, Waiter>();
  private readonly reader = new ChunkReader((m) => this.onMessage(m));

  /**
   * Connect to `address` (the checked address of `target.host`: no second DNS lookup) and
   * publish `target.key` under `target.app`. Rejects with an `RtmpFailure` on any failure, at
   * the latest after `deadlineMs`; `close()` meanwhile cancels it.
   */
  async publish(target: RtmpTarget, address: string, deadlineMs: number): Promise<void> {
    if (this.phase !== 'idle') throw new RtmpFailure('a publisher is used once');
    this.phase = 'connecting';
    const connected = this.wait('#connected');
    const handshaken = this.wait('#handshake');
    const timer = setTimeout(() => this.abort(new RtmpFailure(`no publish within ${deadlineMs} ms`)), deadlineMs);
    try {
      const socket = target.secure
        ? // certificates are checked against the name in the URL, while the connection goes to the checked address
          tlsConnect({ host: address, port: target.port, ...(isIP(target.host) ? {} : { servername: target.host }) })
        : tcpConnect({ host: address, port: target.port });
      this.socket = socket;
      socket.setNoDelay(true);
      socket.once(target.secure ? 'secureConnect' : 'connect', () => this.guard(() => this.settle('#connected', [])));
      socket.on('data', (d: Buffer) => this.guard(() => this.onData(d)));
      socket.on('error', () => this.abort(new RtmpFailure('the connection failed')));
      socket.on('close', () => this.abort(new RtmpFailure('the connection closed')));
      await connected;
      if (this.phase !== 'connecting') throw new RtmpFailure('the connection closed');
      this.phase = 'handshake';
      socket.write(Buffer.concat([Buffer.from([3]), Buffer.alloc(8), randomBytes(1528)])); // C0, C1
      await handshaken;
      this.write(MessageType.SetChunkSize, 0, uint32(OUT_CHUNK), 2);
      await this.command(1, ['connect', 1, { app: target.app, type: 'nonprivate', flashVer: 'FMLE/3.0 (compatible; Tessera)', tcUrl: target.tcUrl }], 0);
      this.send(['releaseStream', 2, null, target.key], 0);
      this.send(['FCPublish', 3, null, target.key], 0);
      const created = await this.command(4, ['createStream', 4, null], 0);
      this.streamId = typeof created[3] === 'number' && Number.isInteger(created[3]) && created[3] > 0 && created[3] < 2 ** 32 ? created[3] : 1;
      const status = this.wait('onStatus');
      this.send(['publish', 5, null, target.key, 'live'], this.streamId);
      const info = (await status)[3];
      const code = info !== null && typeof info === 'object' && !Array.isArray(info) ? info.code : undefined;
      if (code !== 'NetStream.Publish.Start') throw new RtmpFailure('the server refused to publish');
      if ((this.phase as Phase) !== 'chunks') throw new RtmpFailure('the connection closed');
      this.phase = 'published';
      this.started = Date.now();
    } catch (err) {
      this.abort(err instanceof RtmpFailure ? err : new RtmpFailure('the publish failed'));
      throw err instanceof RtmpFailure ? err : new RtmpFailure('the publish failed');
    } finally {
      clearTimeout(timer);
    }
  }

  /** Send a data message (`@setDataFrame`, `onTextData`, ...) on the published stream. */
  data(values: Amf[]): void {
    if (this.phase !== 'published') return;
    this.write(MessageType.Data, this.streamId, amfEncode(values), 4, Date.now() - this.started);
  }

  /** End the stream (or cancel a publish in progress); `onClose` is not called. */
  async close(): Promise<void> {
    const socket = this.socket;
    this.onClose = () => {};
    if (this.phase !== 'published' || !socket) {
      this.abort(new RtmpFailure('closed by the relay'));
      return;
    }
    this.send(['FCUnpublish', 6, null], 0);
    this.send(['deleteStream', 7, null, this.streamId], 0);
    this.phase = 'closed';
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => socket.destroy(), CLOSE_GRACE_MS);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.end();
    });
  }

  /** The socket boundary: whatever a handler throws fails the publish; nothing escapes. */
  private guard(handle: () => void): void {
    try {
      handle();
    } catch (err) {
      this.abort(err instanceof RtmpFailure ? err : new RtmpFailure('the server broke the protocol'));
    }
  }

  /** End everything once: reject every wait, drop the connection, tell `onClose` if the stream was live. */
  private abort(error: RtmpFailure): void {
    if (this.phase === 'closed') return;
    const wasLive = this.phase === 'published';
    this.phase = 'closed';
    for (const waiter of this.waiting.values()) waiter.reject(error);
    this.waiting.clear();
    this.socket?.destroy();
    if (wasLive) this.onClose(error);
  }

  private onData(d: Buffer): void {
    if (this.phase === 'handshake') {
      this.handshake.push(d);
      this.handshakeBytes += d.length;
      if (this.handshakeBytes < HANDSHAKE_BYTES) return;
      const all = Buffer.concat(this.handshake);
      this.handshake = [];
      this.socket!.write(all.subarray(1, 1537)); // C2 echoes S1
      this.phase = 'chunks';
      this.settle('#handshake', []);
      if (all.length > HANDSHAKE_BYTES) this.reader.push(all.subarray(HANDSHAKE_BYTES));
    } else if (this.phase === 'chunks' || this.phase === 'published') this.reader.push(d);
  }

  private onMessage(m: RtmpMessage): void {
    if (this.phase === 'closed') return;
    if (m.typeId === MessageType.UserControl && m.payload.length >= 6 && m.payload.readUInt16BE(0) === 6) {
      // Ping Request: answer with a Ping Response carrying the same time
      this.write(MessageType.UserControl, 0, Buffer.concat([Buffer.from([0, 7]), m.payload.subarray(2, 6)]), 2);
      return;
    }
    if (m.typeId !== MessageType.Command) return;
    const args = amfDecode(m.payload);
    const [name, txn] = args;
    if ((name === '_result' || name === '_error') && typeof txn === 'number') this.settle(txn, args);
    else if (name === 'onStatus') this.settle('onStatus', args);
  }

  private settle(key: number | string, args: Amf[]): void {
    const waiter = this.waiting.get(key);
    if (!waiter) return;
    this.waiting.delete(key);
    waiter.resolve(args);
  }

  /** A promise for an answer; rejected by `abort`. Marked handled: a wait nobody reached yet is no unhandled rejection. */
  private wait(key: number | string): Promise<Amf[]> {
    const answer =
      this.phase === 'closed'
        ? Promise.reject(new RtmpFailure('the connection closed'))
        : new Promise<Amf[]>((resolve, reject) => this.waiting.set(key, { resolve, reject }));
    answer.catch(() => {});
    return answer;
  }

  private async command(txn: number, values: Amf[], streamId: number): Promise<Amf[]> {
    const answer = this.wait(txn);
    this.send(values, streamId);
    const args = await answer;
    if (args[0] === '_error') throw new RtmpFailure(`the server refused ${String(values[0])}`);
    return args;
  }

  private send(values: Amf[], streamId: number): void {
    this.write(MessageType.Command, streamId, amfEncode(values), streamId === 0 ? 3 : 4);
  }

  private write(typeId: number, streamId: number, payload: Buffer, csid: number, timestamp = 0): void {
    const socket = this.socket;
    if (!socket || socket.destroyed) return;
    // a server that stops reading must not make the relay hold the stream in memory
    if (socket.writableLength > MAX_UNSENT) return this.abort(new RtmpFailure('the server stopped reading'));
    socket.write(writeChunks({ typeId, streamId, timestamp, payload }, csid, OUT_CHUNK));
  }
}

function uint32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}
