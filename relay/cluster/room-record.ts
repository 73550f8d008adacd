/**
 * A room's record in Redis, kept by its home so that the room outlives the node: its members
 * (who they are, what their tokens allowed, their place in the join order, their resume
 * credential), its running outputs (as they were started) and what kind of token opened it. When the home dies, the next node to claim the
 * room's lease restores it from the record with every member away on its grace period: the
 * clients resume there, and the room sees no leave and no join.
 *
 * Writes are batched: what changed in one turn of the event loop is one pipeline, one `HSET`
 * and one `HDEL` per room (a join costs a field, not a command).
 */
import { OUTPUTS, type LobbyRequest, type OutputChange, type OutputName } from '../../src/protocol/control.ts';
import type { EffectiveGrant } from '../../src/protocol/grant.ts';
import type { Tier } from '../../src/protocol/messages.ts';
import type { RelayContext } from '../context.ts';
import type { KeptMessage } from '../data/topics.ts';
import { holdSeat } from '../resume.ts';
import { AwayLink } from '../seats.ts';
import type { Member, Opener, Room, RoomObserver } from '../rooms/types.ts';
import { clusterKey, type NodeBus } from './bus.ts';
import { FanoutBudget } from '../data/fanout-budget.ts';

/**
 * Write a room's record if this node holds the room's lease (KEYS: lease, record; ARGV: node,
 * ttl, how many fields to set, the fields and values to set, the fields to delete). Fields are
 * set and deleted in slices: Lua unpacks a few thousand values at most.
 */
const WRITE_RECORD = `
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
local nset = tonumber(ARGV[3])
local last = 5 + nset * 2
local i = 6
while i <= last do
  local j = math.min(i + 999, last)
  redis.call('hset', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
i = last + 1
while i <= #ARGV do
  local j = math.min(i + 999, #ARGV)
  redis.call('hdel', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
redis.call('pexpire', KEYS[2], ARGV[2])
local t = redis.call('time')
redis.call('zadd', KEYS[3], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[5])
return 1`;

/** Fields of a record written by one call of the script (its arguments are spread on the stack). */
export const FIELDS_PER_WRITE = 1000;

/** Keep a record as long as its lease, and bring its entry in the index up to date (Redis's clock; never adds one). */
const RENEW_RECORD = `
redis.call('pexpire', KEYS[1], ARGV[1])
local t = redis.call('time')
return redis.call('zadd', KEYS[2], 'XX', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[2])`;

/** Entries of the index not written for ARGV[1] ms by Redis's clock, from ARGV[2], at most ARGV[3]. */
const DUE_RECORDS = `
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('zrangebyscore', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'LIMIT', ARGV[2], ARGV[3])`;

interface WriteScript {
  tesseraRecord(lease: string, record: string, index: string, node: string, ttlMs: number, set: number, unused: number, entry: string, ...fieldsAndValues: string[]): WriteScript;
  exec(): Promise<unknown>;
}

interface IndexScripts {
  tesseraRenewRecord(record: string, index: string, ttlMs: number, entry: string): Promise<number>;
  tesseraDueRecords(index: string, idleMs: number, offset: number, limit: number): Promise<string[]>;
}

/** What the record keeps of a member. */
interface StoredMember {
  id: string;
  name: string;
  tier: Tier;
  joinedAt: number;
  grant: EffectiveGrant;
  pinned: boolean;
  tokenExp: number;
  tokenKey: string;
  apiKey: string;
  /** Absent in records of earlier versions (counted as room-scoped). */
  domainWide?: boolean;
  position: number;
  credential: string;
}

/** An output running at the home, as it was started. */
interface StoredOutput {
  output: OutputName;
  by: string;
  options: unknown;
}

/** A record read back. */
export interface StoredRoom {
  opener: Opener;
  members: StoredMember[];
  outputs: StoredOutput[];
  history: KeptMessage[];
  /** Ids pinned tokens used: the room's for its lifetime, whichever node it lives on. */
  reserved: string[];
}

const isKept = (v: unknown): v is KeptMessage => {
  const m = v as Partial<KeptMessage> | null;
  return (
    typeof m === 'object' && m !== null && typeof m.seq === 'number' && typeof m.topic === 'string' && typeof m.json === 'string' && typeof m.from === 'string' &&
    typeof m.frameBytes === 'number' && (m.to === undefined || (Array.isArray(m.to) && m.to.every((t) => typeof t === 'string')))
  );
};

const isOutput = (v: unknown): v is StoredOutput => {
  const o = v as Partial<StoredOutput> | null;
  return typeof o === 'object' && o !== null && (OUTPUTS as readonly unknown[]).includes(o.output) && typeof o.by === 'string';
};

const isStored = (v: unknown): v is StoredMember => {
  const m = v as Partial<StoredMember> | null;
  return (
    typeof m === 'object' && m !== null && typeof m.id === 'string' && typeof m.name === 'string' && (m.tier === 'speaker' || m.tier === 'viewer') &&
    typeof m.joinedAt === 'number' && typeof m.grant === 'object' && m.grant !== null && typeof m.pinned === 'boolean' && typeof m.tokenExp === 'number' &&
    typeof m.tokenKey === 'string' && typeof m.apiKey === 'string' && typeof m.position === 'number' && typeof m.credential === 'string'
  );
};

/** Every room with a record, by when its home last wrote or renewed it (ms): how rooms nobody came back to are found. */
const RECORDED = clusterKey('recorded');
const entryOf = (project: string, roomId: string) => JSON.stringify([project, roomId]);

/** The records of the rooms homed on this node. */
export class RoomRecords implements RoomObserver {
  /** Fields to write (a value) or delete (null), by record key, until the end of this turn. */
  private readonly pending = new Map<string, { project: string; roomId: string; fields: Map<string, string | null> }>();
  private scheduled = false;
  /** The node is shutting down: what it holds stays recorded for the rooms' next homes. */
  private frozen = false;
  /** Rooms that finished here: their records are deleted, and nothing is written for them again. */
  private readonly finished = new WeakSet<Room>();

  /** @param ttlMs how long a record outlives its last renewal (the home renews it with its lease) */
  constructor(
    private readonly relay: RelayContext,
    private readonly bus: NodeBus,
    readonly ttlMs: number,
  ) {
    bus.redis.defineCommand('tesseraRecord', { numberOfKeys: 3, lua: WRITE_RECORD });
    bus.redis.defineCommand('tesseraRenewRecord', { numberOfKeys: 2, lua: RENEW_RECORD });
    bus.redis.defineCommand('tesseraDueRecords', { numberOfKeys: 1, lua: DUE_RECORDS });
  }

  /**
   * Write the room's record whole (its lease was lost and claimed again: Redis may have restarted
   * empty, and the record with it).
   */
  rewrite(room: Room): void {
    this.queue(room, 'opener', room.opener);
    for (const member of room.members()) {
      const credential = this.relay.seats.credential(member);
      if (credential) this.issued(member, room, credential);
    }
    for (const started of room.outputs.active()) this.queue(room, `o:${started.output}`, JSON.stringify(started));
    for (const message of room.topics.kept()) this.historyKept(room, message);
    for (const id of room.pinnedIdentities()) this.queue(room, `p:${id}`, '1');
  }

  static key(project: string, roomId: string): string {
    return clusterKey('room', project, roomId);
  }

  /** A credential was issued to a member (at its join, or a resume): its entry, written whole. */
  issued(member: Member, room: Room, credential: string): void {
    const position = room.position(member.id);
    if (position === undefined) return;
    const { id, name, tier, joinedAt, grant, pinned, tokenExp, tokenKey, apiKey, domainWide } = member;
    const stored: StoredMember = { id, name, tier, joinedAt, grant, pinned, tokenExp, tokenKey, apiKey, domainWide, position, credential };
    this.queue(room, `m:${id}`, JSON.stringify(stored));
    // kept when the member leaves: an unpinned token may never take the id, on any node
    if (pinned) this.queue(room, `p:${id}`, '1');
  }

  roomStarted(room: Room): void {
    this.queue(room, 'opener', room.opener);
  }

  roomFinished(room: Room): void {
    if (this.frozen) return;
    // a write queued later (an output that stops after the room) would bring the record back
    this.finished.add(room);
    const key = RoomRecords.key(room.project, room.id);
    this.pending.delete(key);
    this.discard(room.project, room.id).catch((err: unknown) => this.failed(err));
  }

  /** Delete the room's record and its entry in the index. */
  async discard(project: string, roomId: string): Promise<void> {
    await this.bus.redis.multi().del(RoomRecords.key(project, roomId)).zrem(RECORDED, entryOf(project, roomId)).exec();
  }

  /**
   * Rooms whose records no home has written or renewed for `idleMs`: their home died or left and
   * nobody came back to them (a room a member resumed into is renewed by its new home). At most
   * `limit` from `offset`, the longest forgotten first.
   */
  async orphans(idleMs: number, offset: number, limit: number): Promise<Array<{ project: string; roomId: string }>> {
    // Redis's clock, as the entries' scores: nodes whose clocks disagree still agree on what is due
    const entries = await (this.bus.redis as unknown as IndexScripts).tesseraDueRecords(RECORDED, idleMs, offset, limit);
    return entries.flatMap((entry) => {
      try {
        const [project, roomId] = JSON.parse(entry) as unknown[];
        if (typeof project === 'string' && typeof roomId === 'string') return [{ project, roomId }];
      } catch {
        // not an entry this code writes: dropped below
      }
      void this.bus.redis.zrem(RECORDED, entry).catch(() => 0);
      return [];
    });
  }

  participantJoined(): void {
    // written when its credential is issued, in the same turn
  }

  participantLeft(room: Room, member: Member): void {
    this.queue(room, `m:${member.id}`, null);
  }

  /** Members a restore did not seat (no away seat left, or their key revoked): out of the record too. */
  dropMembers(room: Room, ids: readonly string[]): void {
    for (const id of ids) this.queue(room, `m:${id}`, null);
  }

  lobbyRequest(_room: Room, _request: LobbyRequest): void {}

  readonly wantsHistory = true;

  /** A persisted message: kept in the record for the room's next home (the room's history budget bounds them). */
  historyKept(room: Room, message: KeptMessage): void {
    this.queue(room, `h:${message.seq}`, JSON.stringify(message));
  }

  historyForgotten(room: Room, seq: number): void {
    this.queue(room, `h:${seq}`, null);
  }

  identityReleased(room: Room, participantId: string): void {
    this.queue(room, `p:${participantId}`, null);
  }

  /** Reservations a restore made way for (see {@link restoreRoom}): out of the record too. */
  releaseIdentities(room: Room, ids: readonly string[]): void {
    for (const id of ids) this.identityReleased(room, id);
  }

  /** An output that runs is kept with how it was started; one that stopped or failed is forgotten. */
  outputChanged(room: Room, change: OutputChange): void {
    if (change.state === 'active') {
      const started = room.outputs.active().find((o) => o.output === change.output);
      if (started) this.queue(room, `o:${change.output}`, JSON.stringify(started));
    } else if (change.state === 'stopped' || change.state === 'failed') {
      this.queue(room, `o:${change.output}`, null);
    }
  }

  /**
   * Write what this turn changed, then stop writing: the node is shutting down, and its members
   * leaving it are not leaving their rooms.
   */
  freeze(): void {
    this.flush();
    this.frozen = true;
  }

  private queue(room: Room, field: string, value: string | null): void {
    if (this.frozen || this.finished.has(room)) return;
    const key = RoomRecords.key(room.project, room.id);
    let entry = this.pending.get(key);
    if (!entry) this.pending.set(key, (entry = { project: room.project, roomId: room.id, fields: new Map() }));
    entry.fields.set(field, value);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  /**
   * Write what changed, one script per room and turn, and only while this node holds the room's
   * lease: a node that stalled and lost its room to another must not write over the record the
   * room's new home restored it from and keeps now.
   */
  private flush(): void {
    this.scheduled = false;
    if (this.pending.size === 0) return;
    const pipeline = this.bus.redis.pipeline() as unknown as WriteScript;
    try {
      for (const [key, { project, roomId, fields }] of this.pending) {
        // a room rewritten whole has as many fields as members, messages and pinned ids: in
        // calls of a bounded size (80,000 fields spread as one call's arguments overflowed the
        // stack, and the uncaught error ended the node)
        const write = (set: string[], del: string[]) => pipeline.tesseraRecord(clusterKey('home', project, roomId), key, RECORDED, this.bus.node, this.ttlMs, set.length / 2, 0, entryOf(project, roomId), ...set, ...del);
        let set: string[] = [];
        let del: string[] = [];
        for (const [field, value] of fields) {
          if (value === null) del.push(field);
          else set.push(field, value);
          if (set.length / 2 + del.length >= FIELDS_PER_WRITE) {
            write(set, del);
            set = [];
            del = [];
          }
        }
        if (set.length > 0 || del.length > 0) write(set, del);
      }
    } catch (err) {
      this.failed(err);
    } finally {
      this.pending.clear();
    }
    pipeline.exec().catch((err: unknown) => this.failed(err));
  }

  /**
   * Keep the record of a room that lives here as long as its lease, and bring its entry in the
   * index up to date (`XX`: a renewal never adds one, so a room that finished while it ran is not
   * entered again).
   */
  renew(project: string, roomId: string): Promise<unknown> {
    return (this.bus.redis as unknown as IndexScripts).tesseraRenewRecord(RoomRecords.key(project, roomId), RECORDED, this.ttlMs, entryOf(project, roomId));
  }

  /** {@link renew} for many rooms, in one round trip. */
  async renewAll(rooms: ReadonlyArray<{ project: string; roomId: string }>): Promise<void> {
    if (rooms.length === 0) return;
    const pipeline = this.bus.redis.pipeline() as unknown as IndexScripts & { exec(): Promise<Array<[Error | null, unknown]> | null> };
    for (const { project, roomId } of rooms) void pipeline.tesseraRenewRecord(RoomRecords.key(project, roomId), RECORDED, this.ttlMs, entryOf(project, roomId));
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([err]) => err !== null);
    if (failed) throw failed[0];
  }

  /** Whether the room has a record (a home keeps it, or a dead home left it). */
  async exists(project: string, roomId: string): Promise<boolean> {
    return (await this.bus.redis.exists(RoomRecords.key(project, roomId))) === 1;
  }

  /** The room's record, if its last home left one. */
  async load(project: string, roomId: string): Promise<StoredRoom | null> {
    const fields = await this.bus.redis.hgetall(RoomRecords.key(project, roomId));
    const members: StoredMember[] = [];
    const outputs: StoredOutput[] = [];
    const history: KeptMessage[] = [];
    const reserved: string[] = [];
    for (const [field, value] of Object.entries(fields)) {
      const kind = field.slice(0, 2);
      if (kind === 'p:') reserved.push(field.slice(2));
      if (kind !== 'm:' && kind !== 'o:' && kind !== 'h:') continue;
      try {
        const parsed: unknown = JSON.parse(value);
        if (kind === 'm:' && isStored(parsed)) members.push(parsed);
        else if (kind === 'o:' && isOutput(parsed)) outputs.push(parsed);
        else if (kind === 'h:' && isKept(parsed)) history.push(parsed);
      } catch {
        this.relay.log.warn('cluster: a field of a room record is not readable', { room: roomId, field: field.slice(0, 64) });
      }
    }
    if (members.length === 0) return null;
    return { opener: fields.opener === 'domain' ? 'domain' : 'room', members, outputs, history, reserved };
  }

  private failed(err: unknown): void {
    this.relay.log.warn('cluster: a room record was not written', { error: err instanceof Error ? err.message : String(err) });
  }
}

/** Run a function without the rooms' observers hearing of it. */
export type Quietly = <T>(fn: () => T) => T;

/**
 * Open a room from its record: every member as it was, in its place in the join order, away on
 * its grace period under the credential it had, so that its client's resume finds it here.
 */
export function restoreRoom(relay: RelayContext, project: string, roomId: string, stored: StoredRoom, quietly: Quietly): { room: Room; dropped: string[]; released: string[] } {
  const dropped: string[] = [];
  // nothing started and nobody joined: the webhooks are not told again what they were told by the last home
  const { room, restored } = quietly(() => {
    const opened = relay.rooms.getOrCreate(project, roomId, stored.opener);
    const restored = addMembers(relay, project, opened, stored.members, dropped);
    for (const id of stored.reserved) opened.reserveIdentity(id);
    opened.topics.restore(stored.history);
    // arrived now, as far as the history knows: the record does not say when each one came, and
    // an unpinned id's own targeted messages may be a previous holder's (see TopicBoard.history)
    for (const member of opened.members()) opened.topics.arrived(member);
    return { room: opened, restored };
  });
  // reservations the room's budget made way for while its observers were not listening: the
  // record would keep them, and the next home would reserve them again in place of others
  const held = new Set(room.pinnedIdentities());
  const released = stored.reserved.filter((id) => !held.has(id));
  relay.log.info('cluster: room restored from its record', { room: roomId, project, members: restored, outputs: stored.outputs.length, messages: stored.history.length });
  relay.rooms.release(room);
  if (relay.rooms.get(project, roomId) !== room) return { room, dropped, released };
  // what ran at the dead home starts again here, as it was started (a recording goes on in a new file)
  for (const { output, by, options } of stored.outputs) {
    room.outputs.start(output, by, options as never).catch((err: unknown) => relay.log.warn('cluster: an output of a restored room did not start again', { room: roomId, output, error: err instanceof Error ? err.message : String(err) }));
  }
  return { room, dropped, released };
}

/** The members of a record, each in its place, away under its credential; how many were. */
function addMembers(relay: RelayContext, project: string, room: Room, stored: StoredMember[], dropped: string[]): number {
  const members = [...stored].sort((a, b) => a.position - b.position);
  let restored = 0;
  for (const s of members) {
    if (room.get(s.id)) continue;
    if (!relay.keys.isActive(s.apiKey)) {
      dropped.push(s.id);
      continue;
    }
    const member: Member = {
      id: s.id,
      name: s.name,
      tier: s.tier,
      joinedAt: s.joinedAt,
      grant: s.grant,
      pinned: s.pinned,
      tokenExp: s.tokenExp,
      tokenKey: s.tokenKey,
      apiKey: s.apiKey,
      project,
      domainWide: s.domainWide === true,
      link: new AwayLink(() => undefined),
      fanout: new FanoutBudget(relay.config),
    };
    // every member of a restored room is away: a speaker's arrival sent to each was thrown away
    // (1,000 speakers after 50,000 viewers: 50 million sends, 2 s of a blocked node), and one log
    // line a member was another second; the restore's own line says how many
    room.add(member, s.position, false);
    relay.seats.restore(member, room, s.apiKey, s.credential);
    if (holdSeat(relay, member, room, false)) restored++;
    else {
      // no seat to hold (the away seats are full): its credential must not resume into a room it is not in
      relay.seats.forget(member);
      room.remove(member);
      dropped.push(member.id);
    }
  }
  return restored;
}
