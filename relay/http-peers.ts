/**
 * Output files on a cluster: each node keeps the recordings and HLS runs it wrote on its own
 * disk, and says so in Redis; a request for one that is not here is passed to the node that
 * wrote it over HTTP, with the caller's `Authorization`, and its answer streamed back. A passed request carries
 * {@link PEER_HEADER} and is never passed on again (no loops). Nothing of the caller's request
 * goes on but the path the relay built from checked segments and the bearer token.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { pipeline } from 'node:stream';
import { wireError } from '../src/protocol/codes.ts';
import { isRecordingFile, MAX_LISTED_RECORDINGS, RECORDING_ID, type RecordingEntry } from './outputs/storage.ts';
import { onSocketClose } from './send-file.ts';

/**
 * The files of one output as the cluster knows their writer: a recording of a project's room (a
 * recording id means something only with its project and room: another's is not found), or an
 * HLS run (public: its unguessable id is the key).
 */
export type FilePlace = { kind: 'recording'; project: string; roomId: string; id: string } | { kind: 'hls'; id: string };

/** What the HTTP side needs of the cluster to reach other nodes' files. */
export interface PeerFiles {
  /** The HTTP bases (`http://host:port`) of the other live nodes. */
  nodes(): Promise<string[]>;
  /** The HTTP base of the live node that wrote these files, if another node did. */
  locate(place: FilePlace): Promise<string | null>;
  /** True if another node banned this token from this room (bans are kept in Redis). */
  banned(project: string, roomId: string, tokenKey: string, now: number): Promise<boolean>;
  /**
   * The secret the nodes sign the requests they pass with (kept in Redis), once read: a client
   * that set the header itself passed as a node (out of every address's share of downloads).
   */
  readonly peerKey: Buffer | null;
}

/**
 * Marks a request one node passed to another: it is answered from local files only, and had its
 * share of downloads at the node that passed it. Its value, `<ms>.<HMAC>`, proves a node sent it
 * (see {@link peerProof}); a value that does not is as no header.
 */
export const PEER_HEADER = 'x-tessera-peer';
/** How old a passed request's proof may be (ms): the nodes' clocks, and the request's way. */
const PROOF_MS = 60_000;
/** Downloads one client (by its share key) may have passed at once by a node. */
const passingBy = new Map<string, number>();
/** How long a node may take to begin its answer (ms). */
const PEER_TIMEOUT_MS = 5000;
/** A passed download whose reader (or whose node) moves nothing for this long is cut (ms). */
const PEER_IDLE_MS = 60_000;
/** Largest listing read from a node: 500 recordings of a few dozen files each fit well. */
const MAX_LISTING_BYTES = 8 * 1024 * 1024;
/** Passed downloads at once; more wait for a 503's `retry-after`. */
const MAX_PASSED = 256;
/** Headers of a node's answer that go back to the caller. */
const PASSED_HEADERS = ['content-type', 'content-length', 'cache-control', 'last-modified', 'access-control-allow-origin', 'www-authenticate', 'retry-after', 'x-content-type-options'];

let passing = 0;

/** Answers of other nodes being passed on now (this process's, all its relays'). */
export function filesPassing(): number {
  return passing;
}

const mac = (key: Buffer, at: string, method: string, target: string) => createHmac('sha256', key).update(`${at}\n${method}\n${target}`).digest();

/** The value of {@link PEER_HEADER} for a request of `method` to `target` (its path and query, as sent). */
export function peerProof(key: Buffer, method: string, target: string, now = Date.now()): string {
  const at = String(Math.floor(now));
  return `${at}.${mac(key, at, method, target).toString('base64url')}`;
}

/** True if this request was passed by another node of the cluster (its header proves it, with the cluster's key). */
export function fromPeer(req: IncomingMessage, key: Buffer | null, now = Date.now()): boolean {
  const value = req.headers[PEER_HEADER];
  if (key === null || typeof value !== 'string' || value.length > 128) return false;
  const dot = value.indexOf('.');
  const at = value.slice(0, dot);
  if (dot < 1 || !/^\d{1,16}$/.test(at) || Math.abs(now - Number(at)) > PROOF_MS) return false;
  const given = Buffer.from(value.slice(dot + 1), 'base64url');
  const expected = mac(key, at, req.method ?? '', req.url ?? '');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** GET or HEAD `path` at `base`, signed with `key`; resolves with the answer's head, or rejects (unreachable, too slow). */
function ask(base: string, path: string, method: string, authorization: string | undefined, key: Buffer, signal?: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers: Record<string, string> = { [PEER_HEADER]: peerProof(key, method, url.pathname + url.search) };
    if (authorization !== undefined) headers.authorization = authorization;
    const req = request(url, { method, headers, timeout: PEER_TIMEOUT_MS, ...(signal ? { signal } : {}) });
    req.on('timeout', () => req.destroy(new Error('the node did not answer in time')));
    req.on('error', reject);
    req.on('response', (res) => {
      req.setTimeout(0);
      resolve(res);
    });
    req.end();
  });
}

function passedHeaders(res: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of PASSED_HEADERS) {
    const value = res.headers[name];
    if (typeof value === 'string') out[name] = value;
  }
  return out;
}

/** Answer 503 (with a `retry-after`): the download pool is full (`downloads-full`), or the cluster could not be asked (`unreachable`). */
function unavailable(res: ServerResponse, message: string, reason: 'downloads-full' | 'unreachable'): void {
  const body = JSON.stringify({ error: reason === 'downloads-full' ? wireError('RATE_LIMITED', message, reason) : wireError('CONNECTION_FAILED', message, reason) });
  res.writeHead(503, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'retry-after': '1', 'cache-control': 'no-store' });
  res.end(body);
}

/**
 * Answer `req` with `path` of the recording or HLS run `place` from the node that wrote it (Redis
 * knows which: a file nobody wrote, or another project's recording, costs one lookup, never a
 * request to a node). That node's answer goes back as it is (its file, or its refusal). Resolves
 * to `false` when no live node other than this one wrote it: the caller answers 404.
 */
export async function passToPeers(req: IncomingMessage, res: ServerResponse, peers: PeerFiles, place: FilePlace, path: string, share: { key: string; max: number }): Promise<boolean> {
  const key = peers.peerKey;
  const mine = passingBy.get(share.key) ?? 0;
  if (key === null) {
    unavailable(res, 'this node has not read the cluster\'s key yet: try again', 'unreachable');
    return true;
  }
  if (passing >= MAX_PASSED) {
    unavailable(res, 'too many downloads at once', 'downloads-full');
    return true;
  }
  // a client's share of downloads is taken here: the node that wrote the file serves passed requests from every client
  if (share.max > 0 && mine >= share.max) {
    unavailable(res, 'too many downloads from your address at once', 'downloads-full');
    return true;
  }
  passing++;
  passingBy.set(share.key, mine + 1);
  // the slot is held until the answer has been passed on, or until it is known there is none
  let handedOff = false;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    passing--;
    const left = (passingBy.get(share.key) ?? 1) - 1;
    if (left > 0) passingBy.set(share.key, left);
    else passingBy.delete(share.key);
    res.off('close', gone);
    forget();
  };
  const aborted = new AbortController();
  let answered: IncomingMessage | undefined;
  // a response queued behind another on its socket (pipelined) never closes if the socket closes
  // first, and the pipeline below waits for it: the socket's close ends the hand-off too
  const gone = () => {
    aborted.abort();
    if (!handedOff) return;
    answered?.destroy();
    res.destroy();
    release();
  };
  res.once('close', gone);
  const forget = onSocketClose(req.socket, gone);
  try {
    const base = await peers.locate(place).catch(() => undefined);
    if (base === undefined) {
      unavailable(res, 'the cluster cannot be asked where this file is now: try again', 'unreachable');
      return true;
    }
    if (base === null) return false;
    let answer: IncomingMessage;
    try {
      answer = await ask(base, path, req.method === 'HEAD' ? 'HEAD' : 'GET', req.headers.authorization, key, aborted.signal);
    } catch {
      if (!res.destroyed) unavailable(res, 'the node that holds this file did not answer: try again', 'unreachable');
      return true;
    }
    res.writeHead(answer.statusCode ?? 502, passedHeaders(answer));
    res.setTimeout(PEER_IDLE_MS, () => res.destroy());
    answer.setTimeout(PEER_IDLE_MS, () => answer.destroy());
    handedOff = true;
    answered = answer;
    pipeline(answer, res, () => {
      release();
      answer.destroy();
    });
    return true;
  } finally {
    if (!handedOff) release();
  }
}

/** The entries of a node's listing that are what a listing holds; anything else is left out. */
function entriesOf(body: unknown): Listing | null {
  if (typeof body !== 'object' || body === null || !Array.isArray((body as { recordings?: unknown }).recordings)) return null;
  const out: RecordingEntry[] = [];
  for (const e of (body as { recordings: unknown[] }).recordings) {
    if (typeof e !== 'object' || e === null) continue;
    const { recording, file, size, startedAt } = e as Record<string, unknown>;
    if (typeof recording !== 'string' || !RECORDING_ID.test(recording)) continue;
    if (typeof file !== 'string' || !isRecordingFile(file)) continue;
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) continue;
    if (typeof startedAt !== 'string' || startedAt.length > 64) continue;
    out.push({ recording, file, size, startedAt });
  }
  return { files: out, truncated: (body as { truncated?: unknown }).truncated === true };
}

type Listing = { files: RecordingEntry[]; truncated: boolean };

/** A node's listing of the caller's room, or `null` if it could not be read. */
async function listingAt(base: string, authorization: string | undefined, key: Buffer): Promise<Listing | null> {
  let answer: IncomingMessage;
  try {
    answer = await ask(base, '/recordings', 'GET', authorization, key);
  } catch {
    return null;
  }
  if (answer.statusCode !== 200) {
    answer.resume();
    return null;
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => answer.destroy(), PEER_TIMEOUT_MS);
    answer.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_LISTING_BYTES) answer.destroy();
      else chunks.push(chunk);
    });
    answer.on('close', () => {
      clearTimeout(timer);
      if (!answer.complete) return resolve(null);
      try {
        resolve(entriesOf(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
      } catch {
        resolve(null);
      }
    });
  });
}

/**
 * The room's recordings on every node: this node's `local` ones and the others', newest
 * recording first, each file once (nodes that share a directory list the same files), at most
 * {@link MAX_LISTED_RECORDINGS} recordings. `unreachable` counts the nodes that did not answer.
 */
export async function recordingsEverywhere(
  local: Listing,
  peers: PeerFiles,
  authorization: string | undefined,
): Promise<{ files: RecordingEntry[]; truncated: boolean; unreachable: number }> {
  const nodes = await peers.nodes().catch(() => null);
  const key = peers.peerKey;
  let listings: Array<Listing | null>;
  if (nodes === null || key === null) {
    // without Redis the other nodes cannot be found: this node's files, and one node unaccounted for
    listings = [null];
  } else if (passing >= MAX_PASSED) {
    listings = nodes.map(() => null);
  } else {
    passing++;
    try {
      listings = await Promise.all(nodes.map((base) => listingAt(base, authorization, key)));
    } finally {
      passing--;
    }
  }
  const read = [local, ...listings.filter((l) => l !== null)];
  const byKey = new Map<string, RecordingEntry>();
  for (const f of read.flatMap((l) => l.files)) byKey.set(`${f.recording}/${f.file}`, f);
  const all = [...byKey.values()].sort((a, b) => (a.recording === b.recording ? (a.file < b.file ? -1 : 1) : a.recording < b.recording ? 1 : -1));
  const recordings = new Set<string>();
  const files: RecordingEntry[] = [];
  let truncated = read.some((l) => l.truncated);
  for (const f of all) {
    if (!recordings.has(f.recording) && recordings.size >= MAX_LISTED_RECORDINGS) {
      truncated = true;
      break;
    }
    recordings.add(f.recording);
    files.push(f);
  }
  return { files, truncated, unreachable: listings.filter((l) => l === null).length };
}
