/**
 * Where each room lives in a cluster: its home, the node holding its lease in Redis
 * (`tessera:home:<project>:<room>`, `SET NX` with a time-out, renewed while the room lives
 * there). A node that claims a lease learns the room's bans and, if its last home died with
 * members in it, restores the room from its record. Homes found elsewhere are remembered, so a
 * join costs no Redis round trip once a node knows where its room is.
 */
import type { RelayContext } from '../context.ts';
import { clusterKey, type NodeBus } from './bus.ts';
import { ClusterApi } from './cluster-api.ts';
import { restoreRoom, type Quietly, type RoomRecords } from './room-record.ts';

/** How long a node's claim to be a room's home lasts unless renewed (ms). */
export const LEASE_MS = 6000;
/** How often a home renews the claims of the rooms it holds (ms). */
const RENEW_MS = 2000;
/** How often a node looks for rooms whose home is gone and to which nobody came back (ms). */
const ORPHAN_SWEEP_MS = 3000;

/** Renew a lease if this node holds it: PEXPIRE only when the value is ours. */
const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
/** Give up a lease if this node holds it. */
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/** The scripts defined on the node's Redis connection. */
interface Scripts {
  tesseraRenew(key: string, node: string, ms: number): Promise<number>;
  tesseraRelease(key: string, node: string): Promise<number>;
  tesseraForgetRoom(list: string, lease: string, roomId: string): Promise<number>;
}

/** A room's key in this node's maps. */
export const roomKey = (project: string, roomId: string) => `${project}\u0000${roomId}`;

/** The homes of rooms, as one node knows and claims them. */
export class RoomHomes {
  /** Leases this node holds, by room key. */
  private readonly leases = new Map<string, { project: string; roomId: string }>();
  /** Homes of rooms elsewhere found before, by room key: forgotten when the node dies or says it is not the home. */
  private readonly known = new Map<string, string>();
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
  }

  private readonly orphanTimer: ReturnType<typeof setInterval>;
  private adopting = false;

  /**
   * Rooms whose home died or left and to which nobody came back are restored here (the first
   * node to claim each): their members are away on their grace periods, at whose end they leave
   * as from any room, so the webhooks hear `participant-left` and `room-finished`, and outputs
   * that ran there stop and finish their files. Without this such a room would end unheard.
   */
  private async adoptOrphans(): Promise<void> {
    if (this.adopting) return;
    this.adopting = true;
    try {
      for (const { project, roomId } of await this.records.orphans(LEASE_MS + RENEW_MS)) {
        if (!(await this.records.exists(project, roomId))) {
          await this.records.discard(project, roomId);
          continue;
        }
        if ((await this.of(project, roomId)) !== this.bus.node) continue;
        if (this.relay.rooms.get(project, roomId)) this.relay.log.info('cluster: a room nobody came back to was restored here', { room: roomId, project });
        // a record without a member that can come back (their keys revoked): nothing to restore
        else await this.records.discard(project, roomId);
      }
    } catch (err) {
      this.relay.log.warn('cluster: rooms left by other nodes could not be looked for', { error: err instanceof Error ? err.message : String(err) });
    } finally {
      this.adopting = false;
    }
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
        const ready = Promise.all([this.learnBans(project, roomId), redis.zadd(ClusterApi.roomsKey(project), 0, roomId), this.restore(project, roomId)]).then(() => undefined);
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
      if (holder === node || (await this.bus.alive([holder])).has(holder)) return holder;
      // its home died: the lease is given up for a new home to claim (and restore the room)
      await this.scripts.tesseraRelease(key, holder);
    }
    throw new Error(`no home for room ${roomId}`);
  }

  /** This node is the room's home now: if its last home died with members in it, they are restored here. */
  private async restore(project: string, roomId: string): Promise<void> {
    const stored = await this.records.load(project, roomId);
    if (stored) restoreRoom(this.relay, project, roomId, stored, this.quietly);
  }

  /** The room's bans from Redis, where its earlier homes kept them. */
  private async learnBans(project: string, roomId: string): Promise<void> {
    const bans = await this.bus.redis.hgetall(clusterKey('bans', project, roomId));
    for (const [tokenKey, exp] of Object.entries(bans)) this.relay.bans.learn(project, roomId, tokenKey, Number(exp));
  }

  /** Renew the leases (and records) of the rooms this node holds; give up those of rooms that are gone. */
  private async renew(): Promise<void> {
    for (const [key, { project, roomId }] of [...this.leases]) {
      const redisKey = clusterKey('home', project, roomId);
      try {
        // a room being restored here is not in the registry yet: its lease is kept all the same
        // (given up now, another node would claim it and restore the room a second time)
        if (this.relay.rooms.get(project, roomId) || this.restoring.has(key)) {
          if ((await this.scripts.tesseraRenew(redisKey, this.bus.node, LEASE_MS)) === 1) {
            await this.records.renew(project, roomId);
            continue;
          }
          // the lease is gone (Redis restarted empty, or this node stalled past it): claim it again
          if ((await this.bus.redis.set(redisKey, this.bus.node, 'PX', LEASE_MS, 'NX')) === 'OK') {
            // the record may have gone with the lease (Redis restarted empty): it is written whole again
            const room = this.relay.rooms.get(project, roomId);
            if (room) this.records.rewrite(room);
            await this.bus.redis.zadd(ClusterApi.roomsKey(project), 0, roomId);
            continue;
          }
          // another node holds it: it restored the room from its record, which is the room now
          this.relay.log.warn('cluster: another node claimed a room that lives here: it is given up', { room: roomId, project });
          this.leases.delete(key);
          this.lost(project, roomId);
        } else {
          this.leases.delete(key);
          await this.release(project, roomId);
        }
      } catch (err) {
        this.relay.log.warn('cluster: lease renewal failed', { room: roomId, error: err instanceof Error ? err.message : String(err) });
      }
    }
  }

  /** Give up the room's lease, and its place in its project's list if nobody claimed it meanwhile. */
  private async release(project: string, roomId: string): Promise<void> {
    if ((await this.scripts.tesseraRelease(clusterKey('home', project, roomId), this.bus.node)) === 1) {
      await this.scripts.tesseraForgetRoom(ClusterApi.roomsKey(project), clusterKey('home', project, roomId), roomId);
    }
  }

  /** Give up every lease this node holds (it is shutting down), and stop renewing. */
  async releaseAll(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.orphanTimer);
    await Promise.all([...this.leases.values()].map(({ project, roomId }) => this.release(project, roomId).catch(() => 0)));
    this.leases.clear();
  }
}
