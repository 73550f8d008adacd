import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from '../log.ts';

/** A message between nodes: a JSON header and, for frames and chunks, the bytes as they are. */
export interface Envelope {
  readonly header: Record<string, unknown>;
  readonly payload: Buffer | null;
}

/** A header field that must be a string (another node's message is checked like any input), or null. */
export const headerString = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** A header value for a log line: a string as it is, anything else by its type (an object's `toString` may throw). */
export const headerName = (v: unknown): string => (typeof v === 'string' ? v : typeof v);

/** An error for a log line, whatever was thrown (a thrown object's `toString` may throw too). */
export const errorText = (err: unknown): string => (err instanceof Error ? (err.stack ?? err.message) : typeof err === 'string' ? err : typeof err);

const SEPARATOR = 0x0a;

/** One message as bytes: the header's JSON, a newline, the payload. */
export function encodeEnvelope(header: Record<string, unknown>, payload: Uint8Array | null): Buffer {
  const head = Buffer.from(JSON.stringify(header));
  if (!payload) return head;
  return Buffer.concat([head, Buffer.from([SEPARATOR]), payload]);
}

/** The message of some bytes, or null when they are not one (JSON never holds a raw newline). */
export function decodeEnvelope(bytes: Buffer): Envelope | null {
  const cut = bytes.indexOf(SEPARATOR);
  try {
    const header: unknown = JSON.parse((cut < 0 ? bytes : bytes.subarray(0, cut)).toString('utf8'));
    if (typeof header !== 'object' || header === null || Array.isArray(header)) return null;
    return { header: header as Record<string, unknown>, payload: cut < 0 ? null : bytes.subarray(cut + 1) };
  } catch {
    return null;
  }
}

/** How long a call to another node may take before it fails (ms). */
export const CALL_TIMEOUT_MS = 5000;

const KEY_PREFIX = 'tessera:';
const nodeChannel = (node: string) => `${KEY_PREFIX}node:${node}`;
const aliveKey = (node: string) => `${KEY_PREFIX}alive:${node}`;
/** How often a node says it is alive, and how long each saying lasts (ms): a dead node is known within {@link ALIVE_MS}. */
const BEAT_MS = 500;
export const ALIVE_MS = 1500;

/**
 * The relay's link to the other nodes of its cluster, through Redis: one connection for
 * commands and publishing, one subscribed to this node's own channel. A message to a node is a
 * publish on its channel (Redis keeps them in order between two connections), so what one node
 * sends another arrives in the order it was sent. Calls are messages with an id, answered on
 * the caller's channel.
 */
export class NodeBus {
  readonly node: string;
  readonly redis: Redis;
  private readonly sub: Redis;
  private readonly calls = new Map<number, { resolve: (e: Envelope) => void; reject: (err: Error) => void; timer: ReturnType<typeof setTimeout> }>();
  private nextCall = 1;
  private handler: (from: string, envelope: Envelope) => void = () => undefined;

  private constructor(url: string, node: string, private readonly log: Logger) {
    this.node = node;
    const options = { lazyConnect: true, maxRetriesPerRequest: 2, enableOfflineQueue: true };
    this.redis = new Redis(url, options);
    this.sub = new Redis(url, options);
    for (const r of [this.redis, this.sub]) r.on('error', (err: Error) => log.warn('redis', { error: err.message }));
    this.sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => this.receive(message));
    // messages published while this node was cut off from Redis are lost: say so when it is back
    this.sub.on('close', () => {
      if (this.ready) log.warn('cluster: lost Redis', {});
      this.ready = false;
    });
    this.sub.on('ready', () => {
      const wasLost = this.connectedOnce && !this.ready;
      this.ready = true;
      this.connectedOnce = true;
      if (wasLost) {
        log.warn('cluster: Redis is back', {});
        this.recovered();
      }
    });
  }

  private ready = false;
  private connectedOnce = false;
  private recovered: () => void = () => undefined;

  /** What to do when this node is back in touch with Redis after losing it (and with it, messages). */
  onRecovered(handler: () => void): void {
    this.recovered = handler;
  }

  /** Connect to Redis at `url` as node `node` (a fresh random id by default) and listen on its channel. */
  static async connect(url: string, log: Logger, node = randomBytes(6).toString('hex')): Promise<NodeBus> {
    const bus = new NodeBus(url, node, log);
    await Promise.all([bus.redis.connect(), bus.sub.connect()]);
    await bus.sub.subscribe(nodeChannel(node));
    await bus.beat();
    bus.heartbeat = setInterval(() => void bus.beat(), BEAT_MS);
    bus.heartbeat.unref();
    return bus;
  }

  private heartbeat: ReturnType<typeof setInterval> | null = null;
  private retired = false;

  /** Say this node is alive for {@link ALIVE_MS} more. */
  private async beat(): Promise<void> {
    try {
      // a beat sent before the node retired would say it lives again: SET only while it has not
      if (!this.retired) await this.redis.set(aliveKey(this.node), '1', 'PX', ALIVE_MS);
      if (this.retired) await this.redis.del(aliveKey(this.node));
    } catch (err) {
      this.log.warn('cluster: heartbeat failed', { error: err instanceof Error ? err.message : String(err) });
    }
  }

  /** Which of `nodes` are alive (their heartbeat has not run out). */
  async alive(nodes: readonly string[]): Promise<Set<string>> {
    if (nodes.length === 0) return new Set();
    const found = await this.redis.mget(...nodes.map(aliveKey));
    return new Set(nodes.filter((_, i) => found[i] !== null));
  }

  /** What to do with a message from another node that is not an answer to a call. */
  onMessage(handler: (from: string, envelope: Envelope) => void): void {
    this.handler = handler;
  }

  /**
   * Send `header` (and `payload`) to `node`. Messages are queued and go out together at the end
   * of this turn of the event loop, one `PUBLISH` per node: a fan-out to a thousand members on
   * another node is one message there, where the same frame for several links is one entry.
   */
  send(node: string, header: Record<string, unknown>, payload: Uint8Array | null = null): void {
    let queue = this.outgoing.get(node);
    if (!queue) {
      this.outgoing.set(node, (queue = []));
      if (!this.flushing) {
        this.flushing = true;
        queueMicrotask(() => this.flush());
      }
    }
    const last = queue[queue.length - 1];
    if (header.t === 'frame' && last && last.header.t === 'frame' && last.payload === payload && last.header.o === header.o && last.header.b === header.b && last.header.l === header.l) {
      (last.header.links as string[]).push(header.link as string);
      return;
    }
    queue.push(header.t === 'frame' ? { header: { t: 'frame', links: [header.link], o: header.o, b: header.b, l: header.l }, payload } : { header, payload });
  }

  private readonly outgoing = new Map<string, Array<{ header: Record<string, unknown>; payload: Uint8Array | null }>>();
  private flushing = false;
  /** Messages published (one per node per turn), for tests and benchmarks. */
  published = 0;

  private flush(): void {
    this.flushing = false;
    for (const [node, queue] of this.outgoing) {
      const payloads: Uint8Array[] = [];
      const items = queue.map(({ header, payload }) => {
        if (payload) payloads.push(payload);
        return payload ? { ...header, len: payload.byteLength } : header;
      });
      this.published++;
      this.redis.publish(nodeChannel(node), encodeEnvelope({ from: this.node, batch: items }, payloads.length ? Buffer.concat(payloads) : null)).catch((err: Error) => this.log.warn('redis publish failed', { node, error: err.message }));
    }
    this.outgoing.clear();
  }

  /** Send and wait for the answer (`answer()` on the other side), or fail after `timeoutMs` ({@link CALL_TIMEOUT_MS}). */
  call(node: string, header: Record<string, unknown>, payload: Uint8Array | null = null, timeoutMs = CALL_TIMEOUT_MS): Promise<Envelope> {
    const call = this.nextCall++;
    return new Promise<Envelope>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.calls.delete(call);
        reject(new Error(`node ${node} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.calls.set(call, { resolve, reject, timer });
      this.send(node, { ...header, call });
    });
  }

  /** Answer the call a message carried. */
  answer(to: Envelope, header: Record<string, unknown>, payload: Uint8Array | null = null): void {
    const from = to.header.from;
    const call = to.header.call;
    if (typeof from !== 'string' || typeof call !== 'number') return;
    this.send(from, { ...header, answers: call }, payload);
  }

  private receive(bytes: Buffer): void {
    const batch = decodeEnvelope(bytes);
    const { from, batch: items } = batch?.header ?? {};
    if (!batch || typeof from !== 'string' || !Array.isArray(items)) return this.log.warn('cluster: a message that is not one', { bytes: bytes.length });
    let offset = 0;
    for (const item of items as unknown[]) {
      if (typeof item !== 'object' || item === null || Array.isArray(item)) continue;
      const header = item as Record<string, unknown>;
      let payload: Buffer | null = null;
      if (typeof header.len === 'number' && batch.payload) {
        payload = batch.payload.subarray(offset, offset + header.len);
        offset += header.len;
      }
      this.receiveOne({ header: { ...header, from }, payload });
    }
  }

  private receiveOne(envelope: Envelope): void {
    const { answers, from } = envelope.header;
    if (typeof answers === 'number') {
      const pending = this.calls.get(answers);
      if (!pending) return;
      this.calls.delete(answers);
      clearTimeout(pending.timer);
      pending.resolve(envelope);
      return;
    }
    if (typeof from !== 'string') return;
    try {
      this.handler(from, envelope);
    } catch (err) {
      this.log.error('cluster: handling a message failed', { type: headerName(envelope.header.t), error: errorText(err) });
    }
  }

  /** Stop saying this node is alive, at once: the others stop sending it their resumes. */
  async retire(): Promise<void> {
    this.retired = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    await this.redis.del(aliveKey(this.node)).catch(() => 0);
  }

  async close(): Promise<void> {
    await this.retire();
    for (const { reject, timer } of this.calls.values()) {
      clearTimeout(timer);
      reject(new Error('the node is closing'));
    }
    this.calls.clear();
    this.sub.disconnect();
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/**
 * A Redis key of `parts`, each escaped (injective: `:` never appears inside a part). Total: a
 * lone surrogate, which `encodeURIComponent` throws on, is written `%uD800` (which it never writes).
 */
export const clusterKey = (...parts: string[]) => KEY_PREFIX + parts.map(keyPart).join(':');

function keyPart(part: string): string {
  try {
    return encodeURIComponent(part);
  } catch {
    return part.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]|([\uD800-\uDFFF])|[^\uD800-\uDFFF]+/g, (m: string, lone?: string) => (lone ? `%u${lone.charCodeAt(0).toString(16).toUpperCase()}` : encodeURIComponent(m)));
  }
}
