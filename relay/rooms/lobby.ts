import type { LobbyDecision, LobbyOutcome, LobbyRequest } from '../../src/protocol/control.ts';
import type { ServerFrame, WireError } from '../../src/protocol/messages.ts';
import type { Budget } from '../budget.ts';

/** A joiner held in the lobby, with the two ways its wait can end. */
export interface Waiting {
  readonly request: LobbyRequest;
  /** Let it in; returns why it could not enter, if it could not (its wait is then over). */
  admit(): WireError | null;
  /** Why it cannot enter yet while it keeps its place (its token's arrivals in debt for a moment), or null. */
  notYet(): WireError | null;
  /** End its wait with an error (its join fails with it). */
  refuse(error: WireError): void;
}

interface Held extends Waiting {
  timer: ReturnType<typeof setTimeout>;
  /** The count of waiting joiners it was charged to. */
  pool: Budget;
}

/**
 * The joiners of one room waiting for a moderator, oldest first. Each wait ends exactly once:
 * admitted, denied, out of time, or cancelled (the joiner went away). Moderators are told of
 * each request and of each ending.
 */
export class Lobby {
  private readonly held = new Map<string, Held>();

  /** @param toModerators sends a frame to the room's moderators */
  constructor(
    private readonly toModerators: (frame: ServerFrame) => void,
    /** Told of each new request, after the moderators. */
    private readonly requested: (request: LobbyRequest) => void = () => {},
  ) {}

  get size(): number {
    return this.held.size;
  }

  has(participantId: string): boolean {
    return this.held.has(participantId);
  }

  list(): LobbyRequest[] {
    return [...this.held.values()].map((h) => h.request);
  }

  /**
   * Hold a joiner for at most `ttlSeconds`, one of `pool` (the relay's count of waiting joiners,
   * or its project's part of it for a domain-wide token); false when that is spent.
   */
  hold(waiting: Waiting, ttlSeconds: number, pool: Budget, tokenEnds = false): boolean {
    const id = waiting.request.participantId;
    if (!pool.take(1)) return false;
    // `tokenEnds`: the wait ends because the token does (it would never be admitted after)
    const timeout: WireError = tokenEnds
      ? { code: 'INVALID_TOKEN', kind: 'Auth', message: 'the token expired while it waited in the lobby', reason: 'expired' }
      : { code: 'ENTRY_TIMEOUT', kind: 'Lobby', message: `no moderator admitted you within ${ttlSeconds} s`, reason: 'ttl' };
    const timer = setTimeout(() => {
      if (!this.release(id, 'timeout')) return;
      waiting.refuse(timeout);
    }, ttlSeconds * 1000);
    timer.unref?.();
    this.held.set(id, { ...waiting, timer, pool });
    this.toModerators({ type: 'event', name: 'lobby-request', data: waiting.request });
    this.requested(waiting.request);
    return true;
  }

  /** A moderator's decision about one id. */
  decide(participantId: string, admit: boolean, by: string): LobbyDecision {
    const held = this.held.get(participantId);
    if (!held) {
      return { participantId, ok: false, error: { code: 'NOT_FOUND', kind: 'Request', message: `"${participantId}" is not waiting in the lobby (already admitted, denied, gone, or never there)`, reason: 'not-waiting' } };
    }
    // checked before it leaves the lobby: it keeps its place, its ttl and its timer
    const notYet = admit ? held.notYet() : null;
    if (notYet) return { participantId, ok: false, error: notYet };
    this.release(participantId, admit ? 'admitted' : 'denied', by);
    if (!admit) {
      held.refuse({ code: 'ENTRY_DENIED', kind: 'Lobby', message: 'a moderator denied your request to join', reason: 'denied' });
      return { participantId, ok: true };
    }
    const error = held.admit();
    return error ? { participantId, ok: false, error } : { participantId, ok: true };
  }

  /** The joiner went away (socket closed or join aborted); false if it was no longer waiting. */
  cancel(participantId: string, waiting: Waiting): boolean {
    return this.held.get(participantId)?.request === waiting.request && this.release(participantId, 'cancelled');
  }

  /** End one wait with an error (the identity asked again from elsewhere). */
  evict(participantId: string, error: WireError): void {
    const held = this.held.get(participantId);
    if (held && this.release(participantId, 'cancelled')) held.refuse(error);
  }

  /** Refuse everyone (the room ended). */
  clear(error: WireError): void {
    for (const [id, held] of [...this.held]) {
      this.release(id, 'denied');
      held.refuse(error);
    }
  }

  private release(participantId: string, outcome: LobbyOutcome, by?: string): boolean {
    const held = this.held.get(participantId);
    if (!held) return false;
    clearTimeout(held.timer);
    this.held.delete(participantId);
    held.pool.give(1);
    this.toModerators({ type: 'event', name: 'lobby-resolved', data: { participantId, outcome, ...(by ? { by } : {}) } });
    return true;
  }
}
