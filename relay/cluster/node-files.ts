/**
 * Where the other nodes' HTTP sides are, for the output files they keep on their own disks
 * (`http-peers.ts`): each node writes its base URL into one Redis hash when it listens and
 * takes it out when it leaves; a node counts only while its heartbeat lives.
 */
import type { PeerFiles } from '../http-peers.ts';
import { clusterKey, type NodeBus } from './bus.ts';

/** How long the list of live nodes is reused (ms): an HLS audience asks for files every 2 s. */
const NODES_FRESH_MS = 1000;

/** The cluster's view of its nodes' HTTP sides. */
export class ClusterFiles implements PeerFiles {
  private cached: { at: number; bases: Promise<string[]> } | null = null;

  constructor(private readonly bus: NodeBus) {}

  private static readonly KEY = clusterKey('http');

  /** Say where this node's HTTP side is (`http://host:port`). */
  async announce(base: string): Promise<void> {
    await this.bus.redis.hset(ClusterFiles.KEY, this.bus.node, base);
  }

  /** This node is leaving: nobody should ask it for files any more. */
  async withdraw(): Promise<void> {
    await this.bus.redis.hdel(ClusterFiles.KEY, this.bus.node).catch(() => 0);
  }

  nodes(): Promise<string[]> {
    const now = Date.now();
    if (!this.cached || now - this.cached.at > NODES_FRESH_MS) {
      const bases = this.readNodes();
      // a failed read is not kept: the next request asks Redis again
      bases.catch(() => (this.cached = null));
      this.cached = { at: now, bases };
    }
    return this.cached.bases;
  }

  private async readNodes(): Promise<string[]> {
    const all = await this.bus.redis.hgetall(ClusterFiles.KEY);
    const others = Object.keys(all).filter((node) => node !== this.bus.node);
    const alive = await this.bus.alive(others);
    return others.filter((node) => alive.has(node)).map((node) => all[node]!);
  }

  async banned(project: string, roomId: string, tokenKey: string, now: number): Promise<boolean> {
    const exp = await this.bus.redis.hget(clusterKey('bans', project, roomId), tokenKey);
    return exp !== null && Number(exp) > now;
  }
}
