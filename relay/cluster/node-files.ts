/**
 * Where the output files of a cluster are (`http-peers.ts`): each node writes its HTTP side's
 * base URL into one Redis hash when it listens (taken out when it leaves), and which node wrote
 * each recording (`tessera:file:recording:<project>:<room>:<id>`: found only with its project and
 * room) and HLS run (`tessera:file:hls:<run>`) when the output becomes active. A node counts
 * only while its heartbeat lives.
 */
import { randomBytes } from 'node:crypto';
import type { LobbyRequest, OutputChange } from '../../src/protocol/control.ts';
import type { FilePlace, PeerFiles } from '../http-peers.ts';
import type { Room, RoomObserver } from '../rooms/types.ts';
import { clusterKey, type NodeBus } from './bus.ts';
import { credentialSealed, sealCredential } from './credential.ts';

/** How long the list of live nodes is reused (ms): an HLS audience asks for files every 2 s. */
const NODES_FRESH_MS = 1000;
/** How long an HLS run's place is kept (s): a run is replaced at the room's next start, and old ones are the operator's. */
const HLS_PLACE_S = 7 * 24 * 3600;
const HTTP_KEY = clusterKey('http');
/** The secret the nodes sign passed requests with: made by the first node, read by every one. */
const PEER_KEY = clusterKey('peer-key');
/** How often a node reads it again (ms): a Redis restarted empty gets a new one, which each node then takes up. */
const PEER_KEY_EVERY_MS = 30_000;
/** How long a listed node is seen dead before its entry is taken out (ms): past its own 30 s of saying where it is. */
const DEAD_ENTRY_MS = 2 * PEER_KEY_EVERY_MS;
/** The Redis key naming the node that wrote a recording (of its project and room) or an HLS run. */
export const placeKey = (place: FilePlace) => (place.kind === 'recording' ? clusterKey('file', 'recording', place.project, place.roomId, place.id) : clusterKey('file', 'hls', place.id));

/** The cluster's view of its nodes' HTTP sides and of which node wrote which output files. */
export class ClusterFiles implements PeerFiles, RoomObserver {
  private cached: { at: number; bases: Promise<string[]> } | null = null;
  private key: Buffer | null = null;
  private previousKey: Buffer | null = null;
  private keyReadAt = -Infinity;
  /** Nodes listed but not alive, since when this node saw them so. */
  private readonly deadSince = new Map<string, number>();
  private keyTimer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly bus: NodeBus,
    private readonly failed: (err: unknown) => void,
    private readonly clock: () => number = Date.now,
  ) {}

  get peerKey(): Buffer | null {
    return this.key;
  }

  /** A resume credential (its node, room and secret) signed with the cluster's key. */
  seal(unsigned: string): string {
    // the key is read before the node listens (server.ts): no seat is made without it
    return sealCredential(this.key ?? Buffer.alloc(0), unsigned);
  }

  /**
   * Whether a credential was made by a node of this cluster: signed with its key now or the one
   * before (a Redis restarted empty makes a new one). One that is not is checked again once the
   * key is read anew, at most once a second whoever asks (a forged credential makes every resume
   * ask), since another node may have taken up a new key first.
   */
  async sealed(credential: string): Promise<boolean> {
    if (credentialSealed(this.keys(), credential)) return true;
    const now = this.clock();
    if (now - this.keyReadAt < 1000) return false;
    this.keyReadAt = now;
    const before = this.key;
    await this.readKey().catch(this.failed);
    return this.key !== before && credentialSealed(this.keys(), credential);
  }

  private keys(): Buffer[] {
    return [this.key, this.previousKey].filter((k): k is Buffer => k !== null);
  }

  /** Take up the cluster's key (made by the first node to ask). */
  takeKey(): Promise<void> {
    return this.readKey();
  }

  /** Say where this node's HTTP side is (`http://host:port`), and take up the cluster's key. */
  async announce(base: string): Promise<void> {
    await this.readKey();
    await this.bus.redis.hset(HTTP_KEY, this.bus.node, base);
    // said again now and then: a node that seemed dead for a while (others took its entry out) is found again
    this.keyTimer ??= setInterval(() => void Promise.all([this.readKey(), this.bus.redis.hset(HTTP_KEY, this.bus.node, base)]).catch(this.failed), PEER_KEY_EVERY_MS);
    this.keyTimer.unref();
  }

  private async readKey(): Promise<void> {
    await this.bus.redis.set(PEER_KEY, randomBytes(32).toString('base64url'), 'NX');
    const key = await this.bus.redis.get(PEER_KEY);
    if (!key) return;
    const taken = Buffer.from(key, 'base64url');
    if (this.key?.equals(taken)) return;
    if (this.key) this.previousKey = this.key;
    this.key = taken;
  }

  /** This node is leaving: nobody should ask it for files any more. */
  async withdraw(): Promise<void> {
    if (this.keyTimer) clearInterval(this.keyTimer);
    this.keyTimer = null;
    await this.bus.redis.hdel(HTTP_KEY, this.bus.node).catch(() => 0);
  }

  nodes(): Promise<string[]> {
    const now = this.clock();
    if (!this.cached || now - this.cached.at > NODES_FRESH_MS) {
      const cached = { at: now, bases: this.readNodes() };
      // a failed read is not kept: the next request asks Redis again
      cached.bases.catch(() => {
        if (this.cached === cached) this.cached = null;
      });
      this.cached = cached;
    }
    return this.cached.bases;
  }

  private async readNodes(): Promise<string[]> {
    const all = await this.bus.redis.hgetall(HTTP_KEY);
    const others = Object.keys(all).filter((node) => node !== this.bus.node);
    const alive = await this.bus.alive(others);
    // a node that died without leaving (killed) left its entry: node ids are new at each start, so
    // they piled up. Taken out once it has been seen dead for a while: one that only stalled for a
    // few heartbeats is alive again by then (and says where it is every 30 s anyway)
    const now = this.clock();
    const gone: string[] = [];
    for (const node of others) {
      if (alive.has(node)) this.deadSince.delete(node);
      else if (!this.deadSince.has(node)) this.deadSince.set(node, now);
      else if (now - this.deadSince.get(node)! > DEAD_ENTRY_MS) gone.push(node);
    }
    for (const node of this.deadSince.keys()) if (!(node in all)) this.deadSince.delete(node);
    if (gone.length > 0) void this.bus.redis.hdel(HTTP_KEY, ...gone).catch(this.failed);
    return others.filter((node) => alive.has(node)).map((node) => all[node]!);
  }

  async locate(place: FilePlace): Promise<string | null> {
    const node = await this.bus.redis.get(placeKey(place));
    if (node === null || node === this.bus.node) return null;
    const [base, alive] = await Promise.all([this.bus.redis.hget(HTTP_KEY, node), this.bus.alive([node])]);
    return base !== null && alive.has(node) ? base : null;
  }

  async banned(project: string, roomId: string, tokenKey: string, now: number): Promise<boolean> {
    const exp = await this.bus.redis.hget(clusterKey('bans', project, roomId), tokenKey);
    return exp !== null && Number(exp) > now;
  }

  /** An output became active here: the files it writes are this node's to serve. */
  outputChanged(room: Room, change: OutputChange): void {
    if (change.state !== 'active') return;
    if (change.output === 'recording' && change.info) {
      this.bus.redis.set(placeKey({ kind: 'recording', project: room.project, roomId: room.id, id: change.info.recording }), this.bus.node).catch(this.failed);
    } else if (change.output === 'hls' && change.info) {
      const run = /^\/hls\/([0-9a-f]{32})\//.exec(change.info.playlist)?.[1];
      if (run) this.bus.redis.set(placeKey({ kind: 'hls', id: run }), this.bus.node, 'EX', HLS_PLACE_S).catch(this.failed);
    }
  }

  roomStarted(): void {}
  roomFinished(): void {}
  participantJoined(): void {}
  participantLeft(): void {}
  lobbyRequest(_room: Room, _request: LobbyRequest): void {}
}
