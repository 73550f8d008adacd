import { PROTOCOL_VERSION, type JoinFrame, type JoinedFrame } from '../src/protocol/messages.ts';
import { effectiveGrant, type TokenClaims } from '../src/protocol/grant.ts';
import { CloseCode } from '../src/protocol/codes.ts';
import { ADMIN_ACTOR } from '../src/protocol/server-api.ts';
import type { RelayContext } from './context.ts';
import type { Member, MemberLink, Opener, Room } from './rooms/types.ts';
import { tokenKey } from './token/identity.ts';
import { checkScope, verifyToken, type Refusal } from './token/verify.ts';
import { FanoutBudget } from './data/fanout-budget.ts';
import { presenceKey } from './rooms/presence.ts';

/** A join the token allows: what it may enter as. */
export interface Verdict {
  frame: JoinFrame;
  claims: TokenClaims;
  /** The project of the token's API key: the namespace of everything it touches. */
  project: string;
  roomId: string;
  pinned: boolean;
  /** What the token means ({@link tokenKey}): what a removal bans. */
  tokenKey: string;
  /** A room-scoped token opens its room from the relay's quota, a domain-wide one from its project's. */
  opener: Opener;
  /** The joiner must wait in the lobby for a moderator. */
  ask: boolean;
}

/** A successful entry: the member, its room, and the frame to answer with. */
export interface Admission {
  member: Member;
  room: Room;
  joined: JoinedFrame;
}

/**
 * Whether an id reads as the server API's: in any case, width or compatibility form (NFKC), with
 * any hyphen (`server\u2011api`). Letters of other scripts that look alike are not caught: an app
 * tells the server API by `from === "server-api"`, which no other id is.
 */
function looksLikeServerApi(id: string): boolean {
  return id.normalize('NFKC').toLowerCase().replace(/[\u2010-\u2015\u2212\ufe58\ufe63\uff0d]/g, '-') === ADMIN_ACTOR;
}

/**
 * Judge a join frame: the protocol version, the token (steps 1–10) and the removal list.
 * Whether the identity is free is decided at entry, which may come later (after the lobby).
 */
export function judge(relay: RelayContext, frame: JoinFrame): Verdict | Refusal {
  if (frame.v !== PROTOCOL_VERSION) {
    return { code: 'INVALID_ARGUMENT', kind: 'Request', reason: 'unsupported-version', message: `this relay speaks protocol version ${PROTOCOL_VERSION}, not ${frame.v}` };
  }
  const { config, keys } = relay;
  const now = Date.now() / 1000;
  const verified = verifyToken(frame.token, { keys, maxTtlRoom: config.maxTtlRoom, maxTtlDomain: config.maxTtlDomain, leeway: config.tokenLeeway, now });
  if (!verified.ok) return verified;
  const { claims } = verified;
  const roomId = frame.roomId ?? claims.roomId;
  if (roomId === undefined) {
    return { code: 'INVALID_ARGUMENT', kind: 'Request', reason: 'room-required', message: 'the token is domain-wide: give roomId in the join options' };
  }
  const scopeRefusal = checkScope(claims, roomId, frame.participantId);
  if (scopeRefusal) return scopeRefusal;
  // pubsub's `from` and output-changed's `by` name the server API with this id: a member under it would speak as the backend
  if (looksLikeServerApi(frame.participantId)) {
    return { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'identity-reserved', message: `"${ADMIN_ACTOR}" names the server API in messages and output changes: no participant may take it` };
  }
  const key = tokenKey(frame.token, claims);
  const banned = bannedRefusal(relay, verified.project, roomId, key);
  if (banned) return banned;
  const pinned = claims.participantId !== undefined;
  const opener: Opener = claims.roomId === undefined ? 'domain' : 'room';
  return { frame, claims, project: verified.project, roomId, pinned, tokenKey: key, opener, ask: claims.joinPolicy?.mode === 'ask' };
}

/** A removal sticks to the token, pinned or not (an unpinned one would otherwise just pick a new id). */
export function bannedRefusal(relay: RelayContext, project: string, roomId: string, key: string): Refusal | null {
  if (!relay.bans.has(project, roomId, key, Date.now() / 1000)) return null;
  return { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'removed', message: 'this token was used by someone removed from this room: a new token is needed to come back' };
}

/**
 * Whether the relay has room for `extra` more participants in the room (a new room included),
 * and the stage for one more on-stage joiner. Rooms opened by domain-wide tokens count against
 * their project's own quota, never against the relay's, so a leaked audience token cannot keep a
 * room-scoped token out of its room; rooms room-scoped tokens open count against the relay's
 * and against their project's share of it, so one tenant cannot take every room from the others. The stage is bounded because every join and resume is sent
 * the whole of it (`joined`) and every arrival on it goes to everyone: a room whose thousands
 * all joined on stage would cost the relay the square of its size.
 */
export function capacity(relay: RelayContext, verdict: Pick<Verdict, 'project' | 'roomId' | 'opener' | 'claims'>, extra = 1): Refusal | null {
  const { config, rooms } = relay;
  const room = rooms.get(verdict.project, verdict.roomId);
  if (!room) {
    if (verdict.opener === 'domain' && rooms.openedByDomain(verdict.project) >= config.maxDomainRoomsPerProject) {
      return { code: 'RATE_LIMITED', kind: 'Request', reason: 'too-many-rooms', message: `domain-wide tokens of this project may open at most ${config.maxDomainRoomsPerProject} rooms: try again later` };
    }
    if (verdict.opener === 'room' && rooms.size - rooms.openedByDomain() >= config.maxRooms) {
      return { code: 'RATE_LIMITED', kind: 'Request', reason: 'too-many-rooms', message: `this relay holds at most ${config.maxRooms} rooms: try again later` };
    }
    const share = config.maxRoomsPerProject ?? (relay.keys.projectCount > 1 ? Math.max(1, Math.floor(config.maxRooms / 2)) : config.maxRooms);
    if (verdict.opener === 'room' && rooms.countIn(verdict.project) - rooms.openedByDomain(verdict.project) >= share) {
      return { code: 'RATE_LIMITED', kind: 'Request', reason: 'too-many-rooms', message: `this project's rooms on this relay are at most ${share}: try again later` };
    }
    return null;
  }
  if (room.size + room.lobby.size + extra > config.maxRoomSize) {
    return { code: 'RATE_LIMITED', kind: 'Request', reason: 'room-full', message: `this room holds at most ${config.maxRoomSize} participants` };
  }
  if (verdict.claims.isViewer !== true && room.counts().speaker >= config.maxStage) {
    return { code: 'RATE_LIMITED', kind: 'Request', reason: 'stage-full', message: `this room's stage holds at most ${config.maxStage} participants: join as a viewer, or try again later` };
  }
  return null;
}

/** An on-stage arrival is told to everyone: a token that keeps joining and leaving pays for it, and waits while in debt. */
export function joinRateRefusal(relay: RelayContext, verdict: Verdict): Refusal | null {
  if (verdict.claims.isViewer === true || relay.budgets.presence.mayAnnounce(presenceKey(verdict))) return null;
  const wait = Math.ceil(relay.budgets.presence.msUntilCredit(presenceKey(verdict)) / 1000);
  return { code: 'RATE_LIMITED', kind: 'Request', reason: 'join-rate', message: `this token's members arrived and left too often: try again in ${wait} s` };
}

/** An identity a pinned token used is the room's for its lifetime: an unpinned token may not take it. */
export function identityRefusal(room: Room | undefined, verdict: Verdict): Refusal | null {
  if (verdict.pinned || !room?.pinnedIdentity(verdict.frame.participantId)) return null;
  return { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'identity-reserved', message: 'this participantId belongs to a pinned identity of this room and the token does not pin it' };
}

/**
 * Enter the room: the identity rules (a pinned token takes over, an unpinned one never
 * displaces anyone), then the member is added and the `joined` frame built. Synchronous, so
 * two entries of one identity cannot interleave.
 */
export function enter(relay: RelayContext, verdict: Verdict, link: MemberLink): Admission | Refusal {
  const { frame, claims, project, roomId, pinned } = verdict;
  // judged again where the room lives: the verdict may come from another node, or from before a removal (the lobby)
  const banned = bannedRefusal(relay, project, roomId, verdict.tokenKey);
  if (banned) return banned;
  const current = relay.rooms.get(project, roomId);
  const reserved = identityRefusal(current, verdict);
  if (reserved) return reserved;
  const inDebt = joinRateRefusal(relay, verdict);
  if (inDebt) return inDebt;
  const existing = current?.get(frame.participantId);
  // an id waiting in the lobby is taken too: an unpinned join under it got what was sent to it, and its admission then failed
  if (!existing && !pinned && current?.lobby.has(frame.participantId)) {
    return { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'identity-in-use', message: 'this participantId is waiting in the room\'s lobby and the token does not pin it' };
  }
  if (existing) {
    if (!pinned) {
      return { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'identity-in-use', message: 'this participantId is already in the room and the token does not pin it' };
    }
    // a takeover keeps the room's size, but a viewer taken over by a speaker's token goes on stage
    const stage = existing.tier === 'viewer' ? capacity(relay, verdict, 0) : null;
    if (stage) return stage;
    // the room stays through the swap: emptied by the old connection's leave (its only member, a
    // reload of the page), it was ended, its history, outputs and reservations with it, and a new one made
    relay.rooms.keep(current!, () => {
      existing.link.close(CloseCode.DUPLICATE_IDENTITY, 'duplicate-identity');
      // a connection still being answered (its join or resume taken, its session not yet given
      // the room) does not leave with its close: it leaves here, or it stays in the stage's and
      // the audience's lists under an id no longer its own (one pinned token joining on 50
      // sockets at once filled the stage with such ghosts)
      if (current!.get(frame.participantId) === existing) {
        relay.seats.forget(existing);
        current!.remove(existing);
      }
    });
  } else {
    const full = capacity(relay, verdict, current?.lobby.has(frame.participantId) ? 0 : 1);
    if (full) return full;
  }
  const room = relay.rooms.getOrCreate(project, roomId, verdict.opener);
  const member: Member = {
    id: frame.participantId,
    name: frame.name ?? frame.participantId,
    tier: claims.isViewer === true ? 'viewer' : 'speaker',
    joinedAt: Date.now(),
    grant: effectiveGrant(claims.grant),
    pinned,
    tokenExp: claims.exp,
    tokenKey: verdict.tokenKey,
    apiKey: claims.iss,
    project,
    domainWide: verdict.opener === 'domain',
    link,
    fanout: new FanoutBudget(relay.config),
  };
  room.add(member);
  return { member, room, joined: snapshot(relay, room, member) };
}

/** The `joined` frame: what the member needs to know of its room, and its resume credential. */
export function snapshot(relay: RelayContext, room: Room, member: Member): JoinedFrame {
  return {
    type: 'joined',
    v: PROTOCOL_VERSION,
    roomId: room.id,
    self: { id: member.id, name: member.name, isViewer: member.tier === 'viewer', grant: member.grant, joinedAt: member.joinedAt },
    participants: room.stage(member.id),
    counts: room.counts(),
    outputs: room.outputs.statuses(member.grant),
    ...(member.grant.canModerate ? { lobby: room.lobby.list() } : {}),
    resume: { credential: relay.seats.issue(member, room, member.apiKey), graceMs: relay.config.resumeGraceMs },
    limits: { maxFrameBytes: relay.config.maxFrameBytes, maxPayloadBytes: relay.config.maxPayloadBytes },
  };
}
