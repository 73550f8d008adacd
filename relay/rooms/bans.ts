/**
 * Tokens a moderator removed someone with, remembered per project and room until the token
 * expires: that token cannot bring anyone back into the room (a pinned token its identity, an
 * unpinned one under any id); a newly minted token can. A token is known by {@link tokenKey}
 * (what it means, not how it is spelt). Kept outside the rooms so that a ban outlives a room
 * that empties or ends.
 */
export class Bans {
  private readonly until = new Map<string, number>();
  /** Told of each ban added here (a cluster node keeps them in Redis for the room's next home). */
  onAdd: ((project: string, roomId: string, tokenKey: string, exp: number) => void) | null = null;

  private static key(project: string, roomId: string, tokenKey: string): string {
    return `${project}\u0000${roomId}\u0000${tokenKey}`;
  }

  /** Ban until `exp` (unix seconds). */
  add(project: string, roomId: string, tokenKey: string, exp: number): void {
    this.learn(project, roomId, tokenKey, exp);
    this.onAdd?.(project, roomId, tokenKey, exp);
  }

  /** Know of a ban added elsewhere (another node of a cluster): the latest expiry wins. */
  learn(project: string, roomId: string, tokenKey: string, exp: number): void {
    const key = Bans.key(project, roomId, tokenKey);
    this.until.set(key, Math.max(exp, this.until.get(key) ?? 0));
  }

  /** True while the token is refused in that room. */
  has(project: string, roomId: string, tokenKey: string, now: number): boolean {
    const key = Bans.key(project, roomId, tokenKey);
    const exp = this.until.get(key);
    if (exp === undefined) return false;
    if (exp > now) return true;
    this.until.delete(key);
    return false;
  }

  get size(): number {
    return this.until.size;
  }

  /** Forget expired bans. */
  prune(now: number): void {
    for (const [key, exp] of this.until) if (exp <= now) this.until.delete(key);
  }
}
