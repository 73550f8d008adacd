/**
 * Where each room lives in a cluster: its home, the node holding its lease in Redis
 * (`tessera:home:<project>:<room>`, `SET NX` with a time-out, renewed while the room lives
 * there). A node that claims a lease learns the room's bans and, if its last home died with
 * members in it, restores the room from its record. Homes found elsewhere are remembered, so a
 * join costs no Redis round trip once a node knows where its room is.
 */
import type { RelayContext } from '../context.ts';
import { ALIVE_MS, clusterKey, type NodeBus } from './bus.ts';
import { ClusterApi } from './cluster-api.ts';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { restoreRoom, RoomRecords, type Quietly } from './room-record.ts';
import { RecentMap } from '../recent-map.ts';

/** How long a node's claim to be a room's home lasts unless renewed (ms). */
export const LEASE_MS = 6000;
/** How often a home renews the claims of the rooms it holds (ms). */
const RENEW_MS = 2000;
/** How often a node looks for rooms whose home is gone and to which nobody came back (ms). */
const ORPHAN_SWEEP_MS = 3000;
/** Such rooms read from Redis at a time. */
const ORPHAN_BATCH = 20;
/** Changes when Redis restarts empty (set by the first node to find it missing). */
const EPOCH_KEY = clusterKey('epoch');
/**
 * Claim a lease this node lost back, only if the room is still recorded (nobody ended it
 * elsewhere meanwhile) or Redis restarted empty since this node last looked (ARGV[3] = 1: the
 * record went with everything else).
 */
const RECLAIM = `if ARGV[3] ~= '1' and redis.call('exists', KEYS[2]) == 0 then return false end
return redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX')`;

/** Renew a lease if this node holds it: PEXPIRE only when the value is ours. */
const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
/** Give up a lease if this node holds it. */
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/** The scripts defined on the node's Redis connection. */
interface Scripts {
  tesseraRenew(key: string, node: string, ms: number): Promise<number>;
  tesseraRelease(key: string, node: string): Promise<number>;
  tesseraForgetRoom(list: string, lease: string, roomId: string): Promise<number>;
  tesseraReclaim(lease: string, record: string, node: string, ms: number, restarted: 0 | 1): Promise<string | null>;
}

/** Homes of rooms elsewhere a node remembers (about 250 bytes each); a room past them costs a Redis lookup at its next join. */
export const MAX_KNOWN_HOMES = 10_000;

/** A room's key in this node's maps. */
export const roomKey = (project: string, roomId: string) => `${project}\u0000${roomId}`;

/** The homes of rooms, as one node knows and claims them. */
export class RoomHomes {
  /** Leases this node holds, by room key. */
  private readonly leases = new Map<string, { project: string; roomId: string }>();
  /**
   * Homes of rooms elsewhere found before, by room key: forgotten when the node dies or says it
   * is not the home, and the oldest past {@link MAX_KNOWN_HOMES} (a room found once was kept for
   * ever: one member opening rooms on one node and joining them through another added 254 bytes
   * a room, 300 MB an hour, to this node).
   */
  private readonly known = new RecentMap<string, string>(MAX_KNOWN_HOMES);
  /** Rooms being restored from their records here, by room key: entries wait for them. */
  private readonly restoring = new Map<string, Promise<void>>();
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(
    private readonly relay: RelayContext,
    private readonly bus: NodeBus,
    private readonly records: RoomRecords,
    private readonly quietly: Quietly,
    /** The room lives here but another node holds its lease (this node was judged dead while it stalled): give it up. */
    private readonly lost: (project: string, roomId: string) => void,
  ) {
    bus.redis.defineCommand('tesseraRenew', { numberOfKeys: 1, lua: RENEW });
    bus.redis.defineCommand('tesseraRelease', { numberOfKeys: 1, lua: RELEASE });
    bus.redis.defineCommand('tesseraReclaim', { numberOfKeys: 2, lua: RECLAIM });
    // a ban is the room's, wherever it is homed next: kept in Redis until the token expires
    relay.bans.onAdd = (project, roomId, tokenKey, exp) => {
      const key = clusterKey('bans', project, roomId);
      bus.redis
        .multi()
        .hset(key, tokenKey, String(exp))
        .expireat(key, Math.ceil(exp), 'GT')
        .expireat(key, Math.ceil(exp), 'NX')
        .exec()
        .catch((err: unknown) => relay.log.error('cluster: a ban was not stored in Redis', { room: roomId, error: err instanceof Error ? err.message : String(err) }));
    };
    this.timer = setInterval(() => void this.renew(), RENEW_MS);
    this.timer.unref();
    this.orphanTimer = setInterval(() => void this.adoptOrphans(), ORPHAN_SWEEP_MS);
    this.orphanTimer.unref();
    // Redis as this node found it: a lease lost later is claimed back after a restart only
    this.readEpoch().then(
      (epoch) => void (this.epoch ??= epoch),
      () => undefined,
    );
  }

  private readonly orphanTimer: ReturnType<typeof setInterval>;
  private adopting = false;
  private closed = false;

  /**
   * Rooms whose home died or left and to which nobody came back are restored here (the first
   * node to claim each): their members are away on their grace periods, at whose end they leave
   * as from any room, so the webhooks hear `participant-left` and `room-finished` (the outputs
   * that ran start again here, and stop with the room). Without this such a room would end
   * unheard. What is due is drained a batch at a time, for at most a sweep's time.
   */
  private async adoptOrphans(): Promise<void> {
    if (this.adopting || this.closed) return;
    this.adopting = true;
    const until = Date.now() + ORPHAN_SWEEP_MS;
    let skipped = 0;
    try {
      while (!this.closed && Date.now() < until) {
        const due = await this.records.orphans(LEASE_MS + RENEW_MS, skipped, ORPHAN_BATCH);
        for (const { project, roomId } of due) {
          if (this.closed) return;
          try {
            if (!(await this.adopt(project, roomId))) skipped++;
          } catch (err) {
            skipped++;
            this.relay.log.warn('cluster: a room left by another node could not be restored', { room: roomId, project, error: err instanceof Error ? err.message : String(err) });
          }
        }
        if (due.length < ORPHAN_BATCH) break;
      }
    } catch (err) {
      this.relay.log.warn('cluster: rooms left by other nodes could not be looked for', { error: err instanceof Error ? err.message : String(err) });
    } finally {
      this.adopting = false;
    }
  }

  /** Restore a room nobody renews, if nobody holds it; false if it lives on (here or elsewhere). */
  private async adopt(project: string, roomId: string): Promise<boolean> {
    if (!(await this.records.exists(project, roomId))) {
      await this.records.discard(project, roomId);
      return true;
    }
    if (this.here(project, roomId)) return false;
    // a home remembered from before may be the one that died: Redis decides, and nothing is remembered
    this.known.delete(roomKey(project, roomId));
    if ((await this.claimOrFind(project, roomId)) !== this.bus.node || this.closed) return false;
    if (!this.relay.rooms.get(project, roomId)) {
      // nobody in the record could come back (keys revoked, tokens expired): nothing to restore
      await this.records.discard(project, roomId);
      return true;
    }
    await this.records.renew(project, roomId);
    this.relay.log.info('cluster: a room nobody came back to was restored here', { room: roomId, project });
    return true;
  }

  private get scripts(): Scripts {
    return this.bus.redis as unknown as Scripts;
  }

  /** Whether the room lives on this node, under its lease. */
  here(project: string, roomId: string): boolean {
    return this.relay.rooms.get(project, roomId) !== undefined && this.leases.has(roomKey(project, roomId));
  }

  /** The node that is the room's home, claiming it for this node when nobody holds it. */
  async of(project: string, roomId: string): Promise<string> {
    const rk = roomKey(project, roomId);
    await this.restoring.get(rk);
    // a room that lives here under this node's lease, or a home found before: no Redis round trip
    if (this.here(project, roomId)) return this.bus.node;
    const known = this.known.get(rk);
    if (known) return known;
    const found = await this.claimOrFind(project, roomId);
    if (found !== this.bus.node) this.known.set(rk, found);
    return found;
  }

  /** The home remembered for the room, if any. */
  remembered(project: string, roomId: string): string | undefined {
    return this.known.get(roomKey(project, roomId));
  }

  /** Forget where the room was found (that node said it is not its home, or did not answer). */
  forget(project: string, roomId: string, home?: string): void {
    const rk = roomKey(project, roomId);
    if (home === undefined || this.known.get(rk) === home) this.known.delete(rk);
  }

  /** The nodes homes were found on (to be watched for their death as much as those with links here). */
  knownNodes(): Set<string> {
    return new Set(this.known.values());
  }

  /** Forget every room found on these nodes: they are dead. */
  forgetNodes(dead: ReadonlySet<string>): void {
    for (const [key, home] of [...this.known]) if (dead.has(home)) this.known.delete(key);
  }

  /** The live node other than this one that holds the room's lease, if any. */
  async holderElsewhere(project: string, roomId: string): Promise<string | null> {
    const holder = await this.bus.redis.get(clusterKey('home', project, roomId));
    if (holder === null || holder === this.bus.node || !(await this.bus.alive([holder])).has(holder)) return null;
    return holder;
  }

  /** Wait for a restore of the room in progress here, if any. */
  async restored(project: string, roomId: string): Promise<void> {
    await this.restoring.get(roomKey(project, roomId));
  }

  /**
   * Whether this node is the home of a room another node sends a member to: it holds the room's
   * lease (the other node may have found it here before the room ended and the lease was given
   * up, and then it claims it again).
   */
  async stillHere(project: string, roomId: string): Promise<boolean> {
    if (this.here(project, roomId)) return true;
    return (await this.claimOrFind(project, roomId)) === this.bus.node;
  }

  /** A member entered a room here: its lease is this node's to renew. */
  keep(project: string, roomId: string): void {
    this.leases.set(roomKey(project, roomId), { project, roomId });
  }

  /** Claim the room's lease for this node, or name its live holder. */
  private async claimOrFind(project: string, roomId: string): Promise<string> {
    const key = clusterKey('home', project, roomId);
    const rk = roomKey(project, roomId);
    const { redis, node } = this.bus;
    for (let attempt = 0; attempt < 3; attempt++) {
      if ((await redis.set(key, node, 'PX', LEASE_MS, 'NX')) === 'OK') {
        this.leases.set(rk, { project, roomId });
        // all three settle before the claim is ready: a failed one must not end the wait while
        // the restore still runs (the room would live here without its lease)
        const ready = Promise.allSettled([this.learnBans(project, roomId), redis.zadd(ClusterApi.roomsKey(project), 0, roomId), this.restore(project, roomId)]).then((results) => {
          for (const r of results) if (r.status === 'rejected') throw r.reason;
        });
        this.restoring.set(rk, ready);
        try {
          await ready;
        } finally {
          this.restoring.delete(rk);
        }
        return node;
      }
      const holder = await redis.get(key);
      if (holder === node) {
        this.leases.set(rk, { project, roomId });
        // claimed by another entry of this node a moment ago: its restore comes first
        await this.restoring.get(rk);
      }
      if (!holder) continue;
      if (holder === node || (await this.holderAlive(holder))) return holder;
      // its home died: the lease is given up for a new home to claim (and restore the room)
      await this.scripts.tesseraRelease(key, holder);
    }
    throw new Error(`no home for room ${roomId}`);
  }

  /**
   * Whether a lease's holder lives: dead only when its heartbeat is missing at two looks half a
   * heartbeat's life apart, as the nodes' own sweep judges. On one look, a home whose event loop
   * stalled past one heartbeat lost its rooms to the first join or orphan sweep that asked.
   */
  private async holderAlive(holder: string): Promise<boolean> {
    if ((await this.bus.alive([holder])).has(holder)) return true;
    await sleep(ALIVE_MS / 2);
    return (await this.bus.alive([holder])).has(holder);
  }

  /** This node is the room's home now: if its last home died with members in it, they are restored here. */
  private async restore(project: string, roomId: string): Promise<void> {
    const stored = await this.records.load(project, roomId);
    if (!stored) return;
    const { room, dropped, released } = restoreRoom(this.relay, project, roomId, stored, this.quietly);
    // out of the record too (their leaving was not heard, quietly): the next home would restore them again
    this.records.dropMembers(room, dropped);
    this.records.releaseIdentities(room, released);
  }

  /** The room's bans from Redis, where its earlier homes kept them. */
  private async learnBans(project: string, roomId: string): Promise<void> {
    const bans = await this.bus.redis.hgetall(clusterKey('bans', project, roomId));
    for (const [tokenKey, exp] of Object.entries(bans)) this.relay.bans.learn(project, roomId, tokenKey, Number(exp));
  }

  /** Renew the leases (and records) of the rooms this node holds; give up those of rooms that are gone. */
  private async renew(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      // a restart is taken as known once a pass has dealt with every lease (one that failed on
      // an absent Redis must still see the restart at its next try)
      if (await this.renewAll()) this.epoch = await this.readEpoch();
    } catch (err) {
      this.relay.log.warn('cluster: lease renewal failed', { error: err instanceof Error ? err.message : String(err) });
    } finally {
      this.renewing = false;
    }
  }

  private renewing = false;
  /**
   * Redis's epoch as this node last knew it (at its start, then at the end of each renewal that
   * dealt with every lease): a different one means Redis restarted empty since. Unknown (`null`):
   * a lost lease is claimed back as after a restart.
   */
  private epoch: string | null = null;

  private async readEpoch(): Promise<string> {
    await this.bus.redis.set(EPOCH_KEY, randomBytes(8).toString('hex'), 'NX');
    return (await this.bus.redis.get(EPOCH_KEY)) ?? '';
  }

  /**
   * Renew every lease held here; false if any could not be dealt with (Redis away). The leases of
   * rooms that live here are renewed together, in one round trip, and their records in another:
   * one room after another, two awaited round trips each, a node made busy by one token's
   * requests took 11–25 s for a pass over 300–1,000 rooms, its 6 s leases lapsed, and another
   * node took every room and every member was dropped.
   */
  private async renewAll(): Promise<boolean> {
    let ok = true;
    // the leases as they are now: a room claimed during this pass's round trips waits for the
    // next (judged by this pass, its new lease looked lost, and the room was given up)
    const leases = [...this.leases];
    const live: Array<[string, { project: string; roomId: string }]> = [];
    for (const entry of leases) {
      // a room being restored here is not in the registry yet: its lease is kept all the same
      // (given up now, another node would claim it and restore the room a second time)
      if (this.relay.rooms.get(entry[1].project, entry[1].roomId) || this.restoring.has(entry[0])) live.push(entry);
    }
    let renewed: Array<[Error | null, unknown]>;
    try {
      const pipeline = this.bus.redis.pipeline() as unknown as Scripts & { exec(): Promise<Array<[Error | null, unknown]> | null> };
      for (const [, { project, roomId }] of live) void pipeline.tesseraRenew(clusterKey('home', project, roomId), this.bus.node, LEASE_MS);
      renewed = live.length > 0 ? ((await pipeline.exec()) ?? []) : [];
    } catch (err) {
      this.relay.log.warn('cluster: lease renewal failed', { rooms: live.length, error: err instanceof Error ? err.message : String(err) });
      return false;
    }
    const kept = live.filter((_, i) => renewed[i]?.[0] === null && renewed[i]?.[1] === 1);
    try {
      await this.records.renewAll(kept.map(([, place]) => place));
    } catch (err) {
      ok = false;
      this.relay.log.warn('cluster: record renewal failed', { rooms: kept.length, error: err instanceof Error ? err.message : String(err) });
    }
    // dealt with: renewed, or not known (an error: asked again at the next pass)
    const dealt = new Set(kept.map(([key]) => key));
    live.forEach(([key], i) => {
      if (renewed[i]?.[0] == null) return;
      ok = false;
      dealt.add(key);
    });
    for (const [key, lease] of leases) {
      // released, or released and claimed again, meanwhile: not this pass's to judge
      if (dealt.has(key) || this.leases.get(key) !== lease) continue;
      const { project, roomId } = lease;
      const redisKey = clusterKey('home', project, roomId);
      try {
        if (this.relay.rooms.get(project, roomId) || this.restoring.has(key)) {
          // the lease is gone (Redis restarted empty, or this node stalled past it): claim it
          // again, unless another node restored the room meanwhile and it ended there
          // (read now: a pass that waited out a Redis restart must not judge by what it saw before)
          const restarted = this.epoch === null || (await this.readEpoch()) !== this.epoch;
          if ((await this.scripts.tesseraReclaim(redisKey, RoomRecords.key(project, roomId), this.bus.node, LEASE_MS, restarted ? 1 : 0)) === 'OK') {
            // the record may have gone with the lease (Redis restarted empty): it is written whole again
            const room = this.relay.rooms.get(project, roomId);
            if (room) this.records.rewrite(room);
            await this.bus.redis.zadd(ClusterApi.roomsKey(project), 0, roomId);
            continue;
          }
          // another node holds it, or held it and the room ended there: its record is the room
          this.relay.log.warn('cluster: another node claimed a room that lives here: it is given up', { room: roomId, project });
          this.leases.delete(key);
          this.lost(project, roomId);
        } else {
          this.leases.delete(key);
          await this.release(project, roomId);
        }
      } catch (err) {
        ok = false;
        this.relay.log.warn('cluster: lease renewal failed', { room: roomId, error: err instanceof Error ? err.message : String(err) });
      }
    }
    return ok;
  }

  /** Give up the room's lease, and its place in its project's list if nobody claimed it meanwhile. */
  private async release(project: string, roomId: string): Promise<void> {
    if ((await this.scripts.tesseraRelease(clusterKey('home', project, roomId), this.bus.node)) === 1) {
      await this.scripts.tesseraForgetRoom(ClusterApi.roomsKey(project), clusterKey('home', project, roomId), roomId);
    }
  }

  /** Give up every lease this node holds (it is shutting down), and stop renewing. */
  async releaseAll(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    clearInterval(this.orphanTimer);
    await Promise.all([...this.leases.values()].map(({ project, roomId }) => this.release(project, roomId).catch(() => 0)));
    this.leases.clear();
  }
}
