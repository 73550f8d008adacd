/**
 * Tokens whose pinned identity a moderator removed, remembered per room until they expire:
 * that token cannot bring its holder straight back; a newly minted one can. A token is known
 * by its signature. Kept outside the rooms so that a ban outlives a room that empties or ends.
 */
export class Bans {
  private readonly until = new Map<string, number>();

  private static key(roomId: string, signature: string): string {
    return `${roomId}\u0000${signature}`;
  }

  /** Ban until `exp` (unix seconds). */
  add(roomId: string, signature: string, exp: number): void {
    this.until.set(Bans.key(roomId, signature), exp);
  }

  /** True while a token issued before the removal is refused. */
  has(roomId: string, signature: string, now: number): boolean {
    const key = Bans.key(roomId, signature);
    const exp = this.until.get(key);
    if (exp === undefined) return false;
    if (exp > now) return true;
    this.until.delete(key);
    return false;
  }

  /** Forget expired bans. */
  prune(now: number): void {
    for (const [key, exp] of this.until) if (exp <= now) this.until.delete(key);
  }
}
