import type { Connection } from '../connection.ts';
import { SdkError } from '../errors.ts';
import { MAX_LOBBY_DECISIONS, type LobbyDecision, type LobbyRequest } from '../protocol/control.ts';

/**
 * The lobby as a moderator sees it: who waits, and the decisions. `admit` and `deny` need
 * `canModerate` (the relay decides). Listen to the room's `lobby-request` (retroactive: a late
 * listener first gets every request already waiting) and `lobby-resolved` events.
 *
 * @example
 * ```ts
 * room.on('lobby-request', ({ participantId, name }) => askHost(name).then((ok) =>
 *   ok ? room.lobby.admit(participantId) : room.lobby.deny(participantId)));
 * await room.lobby.admit(room.lobby.pending.map((r) => r.participantId)); // everyone at once
 * ```
 */
export class Lobby {
  private readonly waiting = new Map<string, LobbyRequest>();

  /** @internal */
  constructor(
    private readonly connection: Connection,
    initial: LobbyRequest[],
  ) {
    for (const request of initial) this.waiting.set(request.participantId, request);
  }

  /** The requests waiting now, oldest first (empty unless you may moderate). */
  get pending(): LobbyRequest[] {
    return [...this.waiting.values()];
  }

  /**
   * Let one joiner in (rejects with `NOT_FOUND` if it is no longer waiting), or several (resolves
   * with one decision each, in order; an empty list with none). A list past 100 goes in
   * requests of 100, one after another: not at once — if one fails, the decisions made before
   * it stand and the promise rejects with that request's error.
   */
  admit(participantId: string): Promise<void>;
  admit(participantIds: string[]): Promise<LobbyDecision[]>;
  admit(ids: string | string[]): Promise<void | LobbyDecision[]> {
    return this.decide('lobby.admit', ids);
  }

  /** Turn one joiner away (its join fails with `ENTRY_DENIED`), or several. */
  deny(participantId: string): Promise<void>;
  deny(participantIds: string[]): Promise<LobbyDecision[]>;
  deny(ids: string | string[]): Promise<void | LobbyDecision[]> {
    return this.decide('lobby.deny', ids);
  }

  private async decide(method: 'lobby.admit' | 'lobby.deny', ids: string | string[]): Promise<void | LobbyDecision[]> {
    if (Array.isArray(ids)) {
      // nobody waiting is nothing to decide; a long queue goes in requests of the relay's size
      const decisions: LobbyDecision[] = [];
      for (let at = 0; at < ids.length; at += MAX_LOBBY_DECISIONS) {
        decisions.push(...(await this.connection.request(method, { participantIds: ids.slice(at, at + MAX_LOBBY_DECISIONS) })).decisions);
      }
      return decisions;
    }
    const { decisions } = await this.connection.request(method, { participantIds: [ids] });
    const [only] = decisions;
    if (only && !only.ok) throw SdkError.fromWire(only.error);
  }

  /** @internal */
  requested(request: LobbyRequest): boolean {
    if (this.waiting.has(request.participantId)) return false;
    this.waiting.set(request.participantId, request);
    return true;
  }

  /** @internal After a reconnection: the queue now; returns the requests that are new. */
  reconcile(requests: LobbyRequest[]): LobbyRequest[] {
    const now = new Set(requests.map((r) => r.participantId));
    for (const id of [...this.waiting.keys()]) if (!now.has(id)) this.waiting.delete(id);
    return requests.filter((r) => this.requested(r));
  }

  /** @internal */
  resolved(participantId: string): void {
    this.waiting.delete(participantId);
  }
}
