import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { pipeline } from 'node:stream';
import { MAX_TIMER_SECONDS } from './config.ts';
import type { RelayContext } from './context.ts';
import { openRegular } from './outputs/storage.ts';

/** How often a download's pace is looked at (ms; less with a shorter idle time). */
const PACE_CHECK_MS = 5_000;

type Headers = Record<string, string | number>;

/**
 * Files being sent at once, in all, per client address, and per group (a room's recordings):
 * past any, a download is answered 503 with `retry-after`. HLS (public, whoever has the URL) and
 * recordings (a token) have a pool each, so that a crowd of slow readers of a public playlist
 * cannot keep a room's own members from their recordings; and one room's token, from many
 * addresses, cannot take every project's recordings pool.
 */
export class DownloadPool {
  private open = 0;
  private readonly byAddress = new Map<string, number>();
  private readonly byGroup = new Map<string, number>();

  constructor(
    readonly max: number,
    readonly perAddress: number,
    readonly perGroup = 0,
  ) {}

  /**
   * Whether a download from `address` (of `group`, if any) may start now (it then holds a place
   * until `give`); `perAddress` or `perGroup` 0: no such share; `address` null: a request another
   * node passed, which had its client's share there.
   */
  take(address: string | null, group?: string): boolean {
    const mine = address === null ? 0 : (this.byAddress.get(address) ?? 0);
    const ours = group === undefined ? 0 : (this.byGroup.get(group) ?? 0);
    if (this.open >= this.max || (this.perAddress > 0 && mine >= this.perAddress)) return false;
    if (group !== undefined && this.perGroup > 0 && ours >= this.perGroup) return false;
    this.open++;
    if (address !== null) this.byAddress.set(address, mine + 1);
    if (group !== undefined) this.byGroup.set(group, ours + 1);
    return true;
  }

  /** Places held now, in all. */
  get inUse(): number {
    return this.open;
  }

  give(address: string | null, group?: string): void {
    this.open--;
    if (address !== null) drop(this.byAddress, address);
    if (group !== undefined) drop(this.byGroup, group);
  }
}

function drop(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

/** Each relay's pools (a process may run several relays: tests, benchmarks). */
const pools = new WeakMap<RelayContext, { hls: DownloadPool; recordings: DownloadPool }>();

/** The download pool of `kind` on `relay`. */
export function downloadPool(relay: RelayContext, kind: 'hls' | 'recordings'): DownloadPool {
  let mine = pools.get(relay);
  if (!mine) {
    const share = relay.config.downloadsPerAddress;
    // a room's recordings take at most a quarter of their pool
    mine = { hls: new DownloadPool(192, share), recordings: new DownloadPool(64, share, 16) };
    pools.set(relay, mine);
  }
  return mine[kind];
}

/**
 * Whose share a download uses: its client's address, an IPv6 one by its /64 (what one host
 * is usually given, so that it cannot take a share per address of its prefix). `peer`: a
 * request another node of the cluster passed on, which carries many clients' downloads (they
 * had their share at that node): none (null). All of them under one key, the node that wrote an
 * HLS run served 8 passed downloads at once for the whole cluster.
 */
export function shareKey(address: string | undefined, peer: boolean): string | null {
  if (peer) return null;
  if (!address) return '';
  const v4 = /^(?:::ffff:)?(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (v4) return v4[1]!;
  const [head = '', tail] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return groups.slice(0, 4).map((g) => g.toLowerCase().replace(/^0+(?=.)/, '')).join(':') + '::/64';
}

/** Errors of `open` that say the file is not there for this request (anything else is the relay's: EMFILE, EAGAIN). */
const NOT_THERE = new Set(['ENOENT', 'ENOTDIR', 'ELOOP', 'EACCES', 'EISDIR', 'ENXIO', 'ENAMETOOLONG']);

/** What {@link sendFile} answers when it does not send the file. */
export interface SendRefusals {
  notFound(): void;
  busy(error: string): void;
}

/** What waits for each socket's close (`onSocketClose`). */
const closeWatchers = new WeakMap<Socket, Set<() => void>>();

/**
 * Call `fn` when `socket` closes (at once if it has); the function returned forgets it. A
 * pipelined request's response waits in Node's queue behind the one before it, without a socket:
 * if the socket closes first, Node never emits `close` on that response, nor lets `destroy` reach
 * it, so only the socket can say its reader is gone. One listener a socket, however many wait.
 */
export function onSocketClose(socket: Socket, fn: () => void): () => void {
  if (socket.closed) {
    process.nextTick(fn);
    return () => undefined;
  }
  let waiting = closeWatchers.get(socket);
  if (!waiting) {
    const fresh = new Set<() => void>();
    closeWatchers.set(socket, fresh);
    socket.once('close', () => {
      closeWatchers.delete(socket);
      for (const f of fresh) f();
    });
    waiting = fresh;
  }
  const mine = waiting;
  mine.add(fn);
  return () => void mine.delete(fn);
}

/**
 * Send a file without check-then-use: open it (no link followed), check the handle is a
 * regular file, stream exactly the size it had from the handle. A file deleted afterwards is
 * still sent whole; one truncated meanwhile cuts the response. The handle and the pool's place
 * are released on every path, a client that goes away included. A pipelined request's response
 * waits for its socket (Node queues it behind the one before, with backpressure); the socket's
 * close, not the response's, says its client went away before its turn.
 */
export async function sendFile(
  req: IncomingMessage,
  res: ServerResponse,
  relay: RelayContext,
  path: string,
  headers: Headers,
  pool: DownloadPool,
  refusals: SendRefusals,
  peer: boolean,
  group?: string,
): Promise<void> {
  const address = shareKey(req.socket.remoteAddress, peer);
  if (!pool.take(address, group)) return refusals.busy('too many downloads at once');
  let file: Awaited<ReturnType<typeof openRegular>>;
  try {
    file = await openRegular(path);
  } catch (err) {
    pool.give(address, group);
    if (NOT_THERE.has((err as NodeJS.ErrnoException).code ?? '')) return refusals.notFound();
    relay.log.warn('download: the file could not be opened', { error: (err as Error).message });
    return refusals.busy('the relay cannot open files now: try again');
  }
  if (!file) {
    pool.give(address, group);
    return refusals.notFound();
  }
  const opened = file;
  let released = false;
  let deadline: NodeJS.Timeout | undefined;
  let pace: NodeJS.Timeout | undefined;
  let forget = (): void => undefined;
  const release = () => {
    if (released) return;
    released = true;
    clearTimeout(deadline);
    clearInterval(pace);
    forget();
    pool.give(address, group);
    void opened.handle.close().catch(() => undefined);
  };
  try {
    if (res.destroyed || req.socket.destroyed) return release();
    res.writeHead(200, { ...headers, 'content-length': opened.size, 'last-modified': opened.modified.toUTCString(), 'x-content-type-options': 'nosniff' });
    if (req.method === 'HEAD' || opened.size === 0) {
      res.end();
      return release();
    }
    // The slowest a download may go on average (`--download-min-rate`): after the HTTP idle
    // time, one that has sent less than this rate times the time since is cut, and none lasts
    // past the idle time plus its size at this rate. A reader that takes a few bytes now and then
    // never trips the idle limit, and would hold its file (and its place among the downloads)
    // for hours: a deadline set by the size alone gave a 33 MiB file 18 minutes at any pace.
    const { httpIdleMs: idleMs, downloadMinRate: minRate } = relay.config;
    const stream = opened.handle.createReadStream({ start: 0, end: opened.size - 1, autoClose: false });
    // released here, not only when the pipeline calls back: a response still queued behind
    // another has no socket, and neither destroying it nor its file's side ends the pipeline
    // (it waits for every stream to close, and the response never does)
    const cut = () => {
      stream.destroy();
      res.destroy();
      release();
    };
    forget = onSocketClose(req.socket, cut);
    res.setTimeout(2 * idleMs, cut);
    // clamped to what a timer can hold (past 24.8 days Node would fire it at once)
    deadline = setTimeout(cut, Math.min(MAX_TIMER_SECONDS * 1000, idleMs + (opened.size / minRate) * 1000));
    deadline.unref();
    // what it has read from the file is ahead of what the client took by the streams' buffers
    // (and the kernel's): the pace is measured generously, but it is measured as it goes
    const began = performance.now();
    pace = setInterval(() => {
      const late = performance.now() - began - idleMs;
      if (late > 0 && stream.bytesRead < (late / 1000) * minRate) cut();
    }, Math.min(PACE_CHECK_MS, Math.max(100, idleMs / 2)));
    pace.unref();
    stream.on('end', () => {
      if (stream.bytesRead < opened.size) res.destroy();
    });
    pipeline(stream, res, (err) => {
      release();
      if (err && (err as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') relay.log.debug('download ended early', { error: err.message });
    });
  } catch (err) {
    release();
    throw err;
  }
}
