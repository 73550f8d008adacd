import { wireError } from '../src/protocol/codes.ts';
import type { Budget } from './budget.ts';
import { presenceKey } from './rooms/presence.ts';
import type { RelayContext } from './context.ts';
import { bannedRefusal, capacity, identityRefusal, joinRateRefusal, type Verdict } from './join.ts';
import type { Waiting } from './rooms/lobby.ts';
import type { Room } from './rooms/types.ts';
import type { Entered, LobbyJoiner, LobbyPlace, MemberConnection } from './seam.ts';
import type { Refusal } from './token/verify.ts';

/**
 * Whether the token that asked is still good when a moderator admits it: its key still active
 * (and still of its project), not expired, not banned from the room meanwhile.
 */
export function admissionRefusal(relay: RelayContext, verdict: Verdict): Refusal | null {
  const { claims, project, roomId } = verdict;
  const status = relay.keys.status(claims.iss);
  if (status.state !== 'active' || status.project !== project) {
    return { code: 'INVALID_API_KEY', kind: 'Auth', reason: 'revoked-api-key', message: 'the API key of this token was revoked while it waited' };
  }
  const now = Date.now() / 1000;
  if (now > claims.exp + relay.config.tokenLeeway) return { code: 'INVALID_TOKEN', kind: 'Auth', reason: 'expired', message: 'the token expired while it waited' };
  if (relay.bans.has(project, roomId, verdict.tokenKey, now)) {
    return { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'removed', message: 'this token was used by someone removed from this room' };
  }
  return null;
}

/** The count of waiting joiners a joiner is charged to: a domain-wide token's is its project's part of the relay's. */
function lobbyPool(relay: RelayContext, verdict: Verdict): Budget {
  return verdict.opener === 'domain' ? relay.budgets.domain(verdict.project).lobby : relay.budgets.lobby;
}

/** Why this joiner may not wait in the room's lobby now, if it may not. */
function lobbyRefusal(relay: RelayContext, verdict: Verdict, room: Room | undefined): Refusal | null {
  const { config } = relay;
  const { project, roomId, frame, pinned } = verdict;
  // judged again where the room lives, as an entry is: on a cluster the node a removed token
  // joined through did not know of its removal, and it waited (and filled the lobby) there
  const banned = bannedRefusal(relay, project, roomId, verdict.tokenKey);
  if (banned) return banned;
  if (relay.lobbyCooldowns.has(project, roomId, verdict.tokenKey, Date.now() / 1000)) {
    return { code: 'RATE_LIMITED', kind: 'Request', reason: 'lobby-cooldown', message: `a moderator denied this token a moment ago: ask again in up to ${config.lobbyCooldownSec} s` };
  }
  const churn = relay.budgets.lobbyChurn.peek(presenceKey(verdict));
  if (churn && !churn.hasCredit()) {
    return { code: 'RATE_LIMITED', kind: 'Request', reason: 'join-rate', message: `this token's requests to join left the lobby unadmitted too often: ask again in ${Math.ceil(churn.msUntilToken(0) / 1000)} s` };
  }
  const reserved = identityRefusal(room, verdict);
  if (reserved) return reserved;
  const id = frame.participantId;
  const again = room?.lobby.has(id) === true;
  if (!pinned && (again || room?.get(id))) {
    return { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'identity-in-use', message: 'this participantId is already in the room or its lobby and the token does not pin it' };
  }
  if (again) return null; // a pinned identity asking again replaces its own request
  if ((room?.lobby.size ?? 0) >= config.maxLobbyPerRoom || !lobbyPool(relay, verdict).fits(1)) {
    return { code: 'RATE_LIMITED', kind: 'Request', reason: 'lobby-full', message: 'the lobby is full: try again later' };
  }
  return capacity(relay, verdict);
}

/**
 * Hold a joiner in the room's lobby until a moderator decides, its ttl (clamped to the relay's
 * maximum) runs out, or it goes. Returns why it may not wait, or where it waits.
 */
export function waitInLobby(relay: RelayContext, verdict: Verdict, joiner: LobbyJoiner, enter: (verdict: Verdict, link: MemberConnection) => Entered | Refusal): Refusal | LobbyPlace {
  const { config } = relay;
  const { project, roomId, frame, claims } = verdict;
  const existing = relay.rooms.get(project, roomId);
  const refusal = lobbyRefusal(relay, verdict, existing);
  if (refusal) return refusal;
  const id = frame.participantId;
  // before getting the room: the replaced request's end may empty it and drop it
  existing?.lobby.evict(id, { code: 'ENTRY_CANCELLED', kind: 'Lobby', message: 'the same identity asked again from elsewhere', reason: 'replaced' });
  const room = relay.rooms.getOrCreate(project, roomId, verdict.opener);
  const policy = claims.joinPolicy;
  // no longer than the token lives: an expired token is never admitted, and its place would be held for nothing
  const lives = Math.max(1, Math.ceil(claims.exp + config.tokenLeeway - Date.now() / 1000));
  const asked = Math.min(policy?.mode === 'ask' && policy.ttl !== undefined ? policy.ttl : config.lobbyTtl, config.maxLobbyTtl);
  const ttl = Math.min(asked, lives);
  const requestedAt = Date.now();
  // a request that ends without an admission costs its token (see `lobbyChurn`)
  const unadmitted = () => relay.budgets.lobbyChurn.get(presenceKey(verdict)).spend(1);
  const waiting: Waiting = {
    request: { participantId: id, name: frame.name ?? id, requestedAt },
    admit: () => {
      if (!joiner.waitingForLobby) return { code: 'NOT_FOUND', kind: 'Request', message: `"${id}" is no longer waiting`, reason: 'not-waiting' };
      const refusal = admissionRefusal(relay, verdict) ?? enter(verdict, joiner.link);
      if ('code' in refusal) {
        // out of the lobby already: whatever the refusal, the joiner is told (never left waiting with no place)
        joiner.leaveLobby(refusal);
        relay.rooms.release(room);
        return wireError(refusal.code, refusal.message, refusal.reason);
      }
      joiner.admitted(refusal);
      return null;
    },
    notYet: () => {
      // the token's arrivals are in debt for a few seconds: the joiner keeps its place, the moderator is told
      const debt = joinRateRefusal(relay, verdict);
      return debt ? wireError(debt.code, debt.message, debt.reason) : null;
    },
    refuse: (error) => {
      // the room's end is not the token's doing, nor a denial with its cooldown (one without, a
      // bot denying in a loop, is charged)
      if (error.code !== 'ENTRY_DENIED' || (error.reason === 'denied' && config.lobbyCooldownSec === 0)) unadmitted();
      if (error.code === 'ENTRY_DENIED' && error.reason === 'denied' && config.lobbyCooldownSec > 0) {
        relay.lobbyCooldowns.add(project, roomId, verdict.tokenKey, Date.now() / 1000 + config.lobbyCooldownSec);
      }
      joiner.leaveLobby(error);
      relay.rooms.release(room);
    },
  };
  if (!room.lobby.hold(waiting, ttl, lobbyPool(relay, verdict), lives < asked)) return { code: 'RATE_LIMITED', kind: 'Request', reason: 'lobby-full', message: 'the lobby is full: try again later' };
  relay.log.info('lobby: waiting', { participant: id, room: roomId, project, ttl });
  joiner.send({ type: 'lobby', requestedAt, ttl });
  return {
    cancel: () => {
      if (room.lobby.cancel(id, waiting)) unadmitted();
      relay.log.info('lobby: joiner went away', { participant: id, room: room.id });
      relay.rooms.release(room);
    },
  };
}
