/**
 * Output files on a cluster: each node keeps the recordings and HLS runs it wrote on its own
 * disk; a request for one that is not here is passed to the other live nodes over HTTP, with
 * the caller's `Authorization`, and the first that has it answers. A passed request carries
 * {@link PEER_HEADER} and is never passed on again (no loops). Nothing of the caller's request
 * goes on but the path the relay built from checked segments and the bearer token.
 */
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { pipeline } from 'node:stream';
import { isRecordingFile, MAX_LISTED_RECORDINGS, RECORDING_ID, type RecordingEntry } from './outputs/storage.ts';

/** What the HTTP side needs of the cluster to reach other nodes' files. */
export interface PeerFiles {
  /** The HTTP bases (`http://host:port`) of the other live nodes. */
  nodes(): Promise<string[]>;
  /** True if another node banned this token from this room (bans are kept in Redis). */
  banned(project: string, roomId: string, tokenKey: string, now: number): Promise<boolean>;
}

/** Marks a request one node passed to another: it is answered from local files only. */
export const PEER_HEADER = 'x-tessera-peer';
/** How long a node may take to begin its answer (ms). */
const PEER_TIMEOUT_MS = 5000;
/** A passed download whose reader (or whose node) moves nothing for this long is cut (ms). */
const PEER_IDLE_MS = 60_000;
/** Largest listing read from a node: 500 recordings of a few dozen files each fit well. */
const MAX_LISTING_BYTES = 8 * 1024 * 1024;
/** Passed downloads at once; more wait for a 503's `retry-after`. */
const MAX_PASSED = 256;
/** Where a path was last found, tried first next time (HLS players ask every 2 s). */
const FOUND_AT_MAX = 1024;
/** Headers of a node's answer that go back to the caller. */
const PASSED_HEADERS = ['content-type', 'content-length', 'cache-control', 'last-modified', 'access-control-allow-origin', 'www-authenticate', 'retry-after', 'x-content-type-options'];

const foundAt = new Map<string, string>();
let passing = 0;

/** True if this request was passed by another node. */
export function fromPeer(req: IncomingMessage): boolean {
  return req.headers[PEER_HEADER] === '1';
}

/** GET or HEAD `path` at `base`; resolves with the answer's head, or rejects (unreachable, too slow). */
function ask(base: string, path: string, method: string, authorization: string | undefined): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers: Record<string, string> = { [PEER_HEADER]: '1' };
    if (authorization !== undefined) headers.authorization = authorization;
    const req = request(url, { method, headers, timeout: PEER_TIMEOUT_MS });
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

function remember(path: string, base: string): void {
  foundAt.delete(path);
  foundAt.set(path, base);
  if (foundAt.size > FOUND_AT_MAX) foundAt.delete(foundAt.keys().next().value!);
}

/**
 * Answer `req` with `path` from the node that has it. The first node that does not answer 404
 * answers the caller (its file, or its refusal). Resolves to `false` when every node answered
 * 404 (the caller answers 404 itself); a node that could not be asked makes it 503.
 */
export async function passToPeers(req: IncomingMessage, res: ServerResponse, peers: PeerFiles, path: string): Promise<boolean> {
  if (passing >= MAX_PASSED) {
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ error: 'too many downloads at once' }));
    return true;
  }
  passing++;
  let released = false;
  const release = () => {
    if (!released) passing--;
    released = true;
  };
  try {
    const nodes = await peers.nodes().catch(() => null);
    if (nodes === null) {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', 'cache-control': 'no-store' });
      res.end(JSON.stringify({ error: 'the other nodes cannot be found now: try again' }));
      return true;
    }
    const known = foundAt.get(path);
    const order = known !== undefined && nodes.includes(known) ? [known, ...nodes.filter((n) => n !== known)] : nodes;
    let unreachable = 0;
    for (const base of order) {
      if (res.destroyed) return true;
      let answer: IncomingMessage;
      try {
        answer = await ask(base, path, req.method === 'HEAD' ? 'HEAD' : 'GET', req.headers.authorization);
      } catch {
        unreachable++;
        continue;
      }
      if (answer.statusCode === 404) {
        answer.resume();
        continue;
      }
      if (answer.statusCode === 200) remember(path, base);
      res.writeHead(answer.statusCode ?? 502, passedHeaders(answer));
      res.setTimeout(PEER_IDLE_MS, () => res.destroy());
      answer.setTimeout(PEER_IDLE_MS, () => answer.destroy());
      pipeline(answer, res, () => {
        release();
        answer.destroy();
      });
      released = true;
      return true;
    }
    if (unreachable === 0) return false;
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ error: 'a node that may hold this file did not answer: try again' }));
    return true;
  } finally {
    if (!released) release();
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
async function listingAt(base: string, authorization: string | undefined): Promise<Listing | null> {
  let answer: IncomingMessage;
  try {
    answer = await ask(base, '/recordings', 'GET', authorization);
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
  // without Redis the other nodes cannot be found: this node's files, and one node unaccounted for
  const listings = nodes === null ? [null] : await Promise.all(nodes.map((base) => listingAt(base, authorization)));
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
