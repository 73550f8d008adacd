/**
 * Tokens a moderator removed someone with, remembered per project and room until the token
 * expires: that token cannot bring anyone back into the room (a pinned token its identity, an
 * unpinned one under any id); a newly minted token can. A token is known by {@link tokenKey}
 * (what it means, not how it is spelt). Kept outside the rooms so that a ban outlives a room
 * that empties or ends.
 */
export class Bans {
  private readonly until = new Map<string, number>();

  private static key(project: string, roomId: string, tokenKey: string): string {
    return `${project}\u0000${roomId}\u0000${tokenKey}`;
  }

  /** Ban until `exp` (unix seconds). */
  add(project: string, roomId: string, tokenKey: string, exp: number): void {
    this.until.set(Bans.key(project, roomId, tokenKey), exp);
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
