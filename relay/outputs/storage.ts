/**
 * Where outputs keep their files: private directories of the relay's own user, one directory per
 * project and room under an injective encoding of the ids, and files opened without following
 * links. Nothing here deletes what this process did not create.
 */
import { createHash, randomBytes } from 'node:crypto';
import { constants, promises as fsp, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { BLOCK, outputDirUsage } from './disk-usage.ts';

/** A storage root or directory that is not safe to use (a link, someone else's, writable by others). */
export class UnsafeStorageError extends Error {}

/** Longest encoded id kept readable; longer ones become `~` + their SHA-256. */
const MAX_READABLE = 150;

/**
 * One path segment for an id (project, room, participant), injective and safe on every
 * filesystem: `[a-z0-9-]` stay, every other UTF-8 byte becomes `_hh` (so `_` is `_5f`, `.` is
 * `_2e`, `A` is `_41`: names differing only in case stay apart on case-insensitive filesystems),
 * a lone surrogate `_uhhhh`, the empty id `_`; results over 150 characters become `~` and the
 * SHA-256 hex of the escaped form (`~` never occurs in an escaped form).
 */
export function encodeId(id: string): string {
  if (id.length === 0) return '_';
  let out = '';
  for (const ch of id) {
    const cp = ch.codePointAt(0)!;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      out += `_u${cp.toString(16)}`;
      continue;
    }
    if ((cp >= 0x61 && cp <= 0x7a) || (cp >= 0x30 && cp <= 0x39) || cp === 0x2d) {
      out += ch;
      continue;
    }
    for (const byte of Buffer.from(ch, 'utf8')) out += `_${byte.toString(16).padStart(2, '0')}`;
  }
  return out.length > MAX_READABLE ? `~${createHash('sha256').update(out).digest('hex')}` : out;
}

/** What {@link encodeId} can produce. */
export const ENCODED_ID = '(?:~[0-9a-f]{64}|(?:[a-z0-9-]|_[0-9a-f]{2}|_u[0-9a-f]{4})+|_)';

const uid = (): number | undefined => process.getuid?.();

function describe(st: Stats): string {
  return `owner uid ${st.uid}, mode ${(st.mode & 0o7777).toString(8)}`;
}

/** The relay's own directory: a real directory (no link), ours, writable by nobody else. */
function checkOwn(path: string, st: Stats): void {
  if (st.isSymbolicLink()) throw new UnsafeStorageError(`${path} is a symbolic link; the relay's storage must be a real directory`);
  if (!st.isDirectory()) throw new UnsafeStorageError(`${path} is not a directory`);
  const me = uid();
  if (me === undefined) return;
  if (st.uid !== me) throw new UnsafeStorageError(`${path} belongs to someone else (${describe(st)}); the relay (uid ${me}) uses only its own directories`);
  if ((st.mode & 0o022) !== 0) throw new UnsafeStorageError(`${path} is writable by group or others (${describe(st)}); make it private (chmod 700)`);
}

/**
 * A directory above the root: ours or root's; writable by others only with the sticky bit
 * (like /tmp), so that nobody else can swap what lies below it. A link is followed only if it
 * is ours or root's.
 */
async function checkAncestor(path: string, lst: Stats): Promise<void> {
  const me = uid();
  if (me === undefined) return;
  const trusted = (st: Stats) => st.uid === me || st.uid === 0;
  if (lst.isSymbolicLink() && !trusted(lst)) throw new UnsafeStorageError(`${path} is a symbolic link of someone else (${describe(lst)})`);
  const st = lst.isSymbolicLink() ? await fsp.stat(path) : lst;
  if (!st.isDirectory()) throw new UnsafeStorageError(`${path} is not a directory`);
  if (!trusted(st)) throw new UnsafeStorageError(`${path} belongs to someone else (${describe(st)})`);
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) throw new UnsafeStorageError(`${path} is writable by others without the sticky bit (${describe(st)})`);
}

async function lstatOrNull(path: string): Promise<Stats | null> {
  try {
    return await fsp.lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Create one private directory (0700), or check the one that is there. */
async function ensureOwnDir(path: string): Promise<void> {
  try {
    await fsp.mkdir(path, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  checkOwn(path, await fsp.lstat(path));
}

/**
 * Make `root` usable as private storage and return its absolute path: every missing directory
 * on the way is created 0700; the root must be the relay's own (no link, same uid, not group- or
 * other-writable), and each directory above it ours or root's, not writable by others unless
 * sticky. Throws {@link UnsafeStorageError} otherwise. With `create: false`, a missing root
 * gives `null` and nothing is created.
 */
export async function privateRoot(root: string, create = true): Promise<string | null> {
  const abs = resolve(root);
  const chain: string[] = [];
  for (let p = abs; ; p = dirname(p)) {
    chain.unshift(p);
    if (dirname(p) === p) break;
  }
  for (const [i, path] of chain.entries()) {
    const isRoot = i === chain.length - 1;
    const st = await lstatOrNull(path);
    if (!st) {
      if (!create) return null;
      await ensureOwnDir(path);
      continue;
    }
    if (isRoot) checkOwn(path, st);
    else await checkAncestor(path, st);
  }
  return abs;
}

/** A private subdirectory of a checked directory: created 0700, or checked if it is there. */
export async function privateSubdir(parent: string, name: string): Promise<string> {
  const path = join(parent, name);
  await ensureOwnDir(path);
  return path;
}

/** An existing subdirectory that is the relay's own, or `null` if it is missing or anything else. */
export async function existingSubdir(parent: string, name: string): Promise<string | null> {
  const path = join(parent, name);
  const st = await lstatOrNull(path);
  if (!st) return null;
  try {
    checkOwn(path, st);
  } catch {
    return null;
  }
  return path;
}

/** An open regular file: read from the handle, close it when done. */
export interface OpenFile {
  handle: FileHandle;
  size: number;
  modified: Date;
}

/**
 * Open a file for reading without following a link in its last component and without
 * blocking on a FIFO, then check the handle (not the name) is a regular file. `null` when the
 * handle is not one; the handle is closed on every path that does not return it. The error of
 * `open` is thrown: a missing file (ENOENT, ELOOP for a link) is the caller's 404, but a relay out
 * of descriptors (EMFILE) must not say that a file is not there.
 */
export async function openRegular(path: string): Promise<OpenFile | null> {
  const handle = await fsp.open(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0));
  try {
    const st = await handle.stat();
    if (st.isFile()) return { handle, size: st.size, modified: st.mtime };
  } catch {
    // fall through: closed below
  }
  await handle.close().catch(() => undefined);
  return null;
}

/** Create a file that must not exist yet (no overwrite, no link followed), private to the relay. */
export async function createExclusive(path: string): Promise<FileHandle> {
  return fsp.open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0), 0o600);
}

// ---- recordings ------------------------------------------------------------------------------

/** A recording id: its start time (UTC, to the second) and 8 random characters. */
export const RECORDING_ID = /^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z-[a-z0-9]{8}$/;

/** The timeline of a recording. */
export const TIMELINE_FILE = 'timeline.jsonl';

/** The stage composite of a recording (H.264 + AAC), written at its stop. */
export const COMPOSITE_FILE = 'composite.mp4';

/** A track file: `<encoded participant>--<source>[--N].webm`. */
const TRACK_FILE = new RegExp(`^${ENCODED_ID}--[a-z]+(?:--[1-9][0-9]{0,5})?\\.webm$`);

/** True for a name the recording output writes (and nothing else is served). */
export function isRecordingFile(name: string): boolean {
  return name === TIMELINE_FILE || name === COMPOSITE_FILE || (name.length <= 255 && TRACK_FILE.test(name));
}

/** A new recording id, e.g. `2026-11-23T15-20-01Z-k3j9x2ab`. */
export function newRecordingId(now = new Date()): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const suffix = [...randomBytes(8)].map((b) => alphabet[b % alphabet.length]).join('');
  return `${now.toISOString().slice(0, 19).replace(/:/g, '-')}Z-${suffix}`;
}

/** The start time of a recording id, as ISO 8601. */
export function recordingStartedAt(id: string): string {
  const [date, time] = id.slice(0, 19).split('T') as [string, string];
  return `${date}T${time.replace(/-/g, ':')}Z`;
}

/** The name of a track file; `n` > 1 for a later publication of the same source. */
export function trackFileName(participantId: string, source: string, n: number): string {
  return `${encodeId(participantId)}--${encodeId(source)}${n > 1 ? `--${n}` : ''}.webm`;
}

/** The path segments of a room's recordings below the root. */
export function roomSegments(project: string, roomId: string): [string, string] {
  return [encodeId(project), encodeId(roomId)];
}

/** Recording directories this process is writing: they cannot be deleted until {@link recordingWritten}. */
const writingRecordings = new Set<string>();

/**
 * Create (privately) the directory of a new recording: `<root>/<project>/<room>/<id>`. It is
 * being written from then on, until {@link recordingWritten}.
 */
export async function createRecordingDir(root: string, project: string, roomId: string, id: string): Promise<string> {
  let dir = (await privateRoot(root))!;
  for (const segment of roomSegments(project, roomId)) dir = await privateSubdir(dir, segment);
  const path = join(dir, id);
  await fsp.mkdir(path, { mode: 0o700 });
  writingRecordings.add(path);
  try {
    checkOwn(path, await fsp.lstat(path));
  } catch (err) {
    writingRecordings.delete(path);
    throw err;
  }
  return path;
}

/** The recording of `path` has written its last file (or failed): it may be deleted now. */
export function recordingWritten(path: string): void {
  writingRecordings.delete(path);
}

/** The directory of a project's recordings, `<root>/<project>`, if it is there and the relay's own. */
export async function projectRecordingsDir(root: string, project: string): Promise<string | null> {
  const base = await privateRoot(root, false);
  return base === null ? null : existingSubdir(base, encodeId(project));
}

/** What {@link deleteRecording} did. */
export type RecordingDeletion = { deleted: true; bytes: number } | { deleted: false; why: 'missing' | 'writing' };

/**
 * Delete one finished recording of exactly this project and room: its directory, found level
 * by level as {@link recordingDir} finds it (never a link, only the relay's own directories;
 * `fs.rm` removes links inside without following them). A recording this process is still
 * writing is left alone. `bytes`: what its files took, measured before (for the project's quota).
 */
export async function deleteRecording(root: string, project: string, roomId: string, id: string): Promise<RecordingDeletion> {
  const dir = await recordingDir(root, project, roomId, id);
  if (dir === null) return { deleted: false, why: 'missing' };
  if (writingRecordings.has(dir)) return { deleted: false, why: 'writing' };
  const { bytes } = await outputDirUsage(dir);
  // the name goes first, so that a download or a second deletion finds nothing half-deleted
  const doomed = join(dirname(dir), `.deleting-${randomBytes(8).toString('hex')}`);
  try {
    await fsp.rename(dir, doomed);
  } catch (err) {
    // another deletion took it first
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { deleted: false, why: 'missing' };
    throw err;
  }
  await fsp.rm(doomed, { recursive: true, force: true });
  return { deleted: true, bytes: bytes + BLOCK };
}

/**
 * The directory of one recording of exactly this project and room, or `null`: each level is
 * looked up by its own encoded name and must be the relay's own directory — never a prefix
 * match, never a link.
 */
export async function recordingDir(root: string, project: string, roomId: string, id: string): Promise<string | null> {
  if (!RECORDING_ID.test(id)) return null;
  let dir = await privateRoot(root, false);
  for (const segment of [...roomSegments(project, roomId), id]) {
    if (dir === null) return null;
    dir = await existingSubdir(dir, segment);
  }
  return dir;
}

/** A file of a recording, as listed. */
export interface RecordingEntry {
  recording: string;
  file: string;
  size: number;
  startedAt: string;
}

/** Most recordings one listing reads (newest first). */
export const MAX_LISTED_RECORDINGS = 500;

/**
 * What one listing reads at most: entries of the room's directory (a `canRecord` member can
 * grow it by a directory at each start), and entries of its recordings' directories together
 * (a recording holds a file per publication). Past either the listing is `truncated`; past the
 * first it holds the newest of the entries read, not necessarily the room's newest.
 */
export const LISTING_LIMITS = Object.freeze({ roomEntries: 10_000, files: 10_000 });

/** At most `max` names of a directory's entries, read as a stream; `complete` when there were no more. */
async function readNames(path: string, max: number): Promise<{ names: string[]; complete: boolean }> {
  const names: string[] = [];
  const dir = await fsp.opendir(path, { bufferSize: 128 });
  try {
    for (;;) {
      const entry = await dir.read();
      if (entry === null) return { names, complete: true };
      if (names.length >= max) return { names, complete: false };
      names.push(entry.name);
    }
  } finally {
    await dir.close().catch(() => undefined);
  }
}

/**
 * The files of the recordings of exactly this project and room, newest recording first, reading
 * at most `limits` entries ({@link LISTING_LIMITS}).
 */
export async function listRecordingFiles(root: string, project: string, roomId: string, limits: { roomEntries: number; files: number } = LISTING_LIMITS): Promise<{ files: RecordingEntry[]; truncated: boolean }> {
  let dir = await privateRoot(root, false);
  for (const segment of roomSegments(project, roomId)) {
    if (dir === null) break;
    dir = await existingSubdir(dir, segment);
  }
  if (dir === null) return { files: [], truncated: false };
  const room = await readNames(dir, limits.roomEntries);
  const ids = room.names.filter((n) => RECORDING_ID.test(n)).sort().reverse();
  let truncated = !room.complete || ids.length > MAX_LISTED_RECORDINGS;
  let left = limits.files;
  const files: RecordingEntry[] = [];
  for (const id of ids.slice(0, MAX_LISTED_RECORDINGS)) {
    if (left <= 0) {
      truncated = true;
      break;
    }
    const recording = await existingSubdir(dir, id);
    if (!recording) continue;
    const read = await readNames(recording, left).catch(() => ({ names: [] as string[], complete: true }));
    left -= read.names.length;
    if (!read.complete) truncated = true;
    for (const name of read.names.filter(isRecordingFile).sort()) {
      const st = await lstatOrNull(join(recording, name)).catch(() => null);
      if (st?.isFile()) files.push({ recording: id, file: name, size: st.size, startedAt: recordingStartedAt(id) });
    }
  }
  return { files, truncated };
}

// ---- HLS runs --------------------------------------------------------------------------------

/** An HLS run id: 128 random bits as hex. */
export const RUN_ID = /^[0-9a-f]{32}$/;

/** Run directories this process created, with their project: the only ones it may ever delete. */
const createdRuns = new Map<string, string>();
/** The runs of each project, by storage root and project (what its quota counts). */
const projectRunDirs = new Map<string, Set<string>>();
const runsKey = (root: string, project: string) => `${resolve(root)}\u0000${project}`;

/**
 * Create the private directory of a new HLS run of `project`, `<root>/<runId>`. The run's URL
 * carries only its id, so the project it belongs to is known to the process that made it.
 */
export async function createRunDir(root: string, project: string): Promise<{ runId: string; path: string }> {
  const base = (await privateRoot(root))!;
  const runId = randomBytes(16).toString('hex');
  const path = join(base, runId);
  await fsp.mkdir(path, { mode: 0o700 });
  checkOwn(path, await fsp.lstat(path));
  registerRun(path, runsKey(root, project));
  return { runId, path };
}

function registerRun(path: string, key: string): void {
  createdRuns.set(path, key);
  let runs = projectRunDirs.get(key);
  if (!runs) projectRunDirs.set(key, (runs = new Set()));
  runs.add(path);
}

/**
 * The HLS run directories of `project` under `root` that this process created and has not
 * deleted (runs of an earlier process are not known to belong to anyone, and never deleted).
 */
export function projectRuns(root: string, project: string): string[] {
  return [...(projectRunDirs.get(runsKey(root, project)) ?? [])];
}

/** The directory of an HLS run, if it is the relay's own; `null` otherwise. */
export async function runDir(root: string, runId: string): Promise<string | null> {
  if (!RUN_ID.test(runId)) return null;
  const base = await privateRoot(root, false);
  return base === null ? null : existingSubdir(base, runId);
}

/**
 * Delete a run directory — only one this process created, and only if it is still a real
 * directory of ours (a link put in its place is left alone). Returns whether it deleted.
 */
export async function removeRunDir(path: string): Promise<boolean> {
  const key = createdRuns.get(path);
  if (key === undefined) return false;
  // unregistered before the first await: a second deletion of the same run finds nothing to do
  createdRuns.delete(path);
  projectRunDirs.get(key)?.delete(path);
  if (projectRunDirs.get(key)?.size === 0) projectRunDirs.delete(key);
  const st = await lstatOrNull(path);
  if (!st) return false;
  try {
    checkOwn(path, st);
  } catch {
    return false;
  }
  try {
    // a file made while the tree is deleted fails its last rmdir (ENOTEMPTY): tried again
    await fsp.rm(path, { recursive: true, force: true, maxRetries: 3, retryDelay: 50 });
  } catch (err) {
    // what is left is still the relay's own, and counted in its project's disk quota
    registerRun(path, key);
    throw err;
  }
  return true;
}
