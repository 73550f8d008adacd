import { PROTOCOL_VERSION, type JoinFrame, type JoinedFrame } from '../src/protocol/messages.ts';
import { effectiveGrant, type TokenClaims } from '../src/protocol/grant.ts';
import { CloseCode } from '../src/protocol/codes.ts';
import type { RelayContext } from './context.ts';
import type { Member, MemberLink, Room } from './rooms/types.ts';
import { checkScope, verifyToken, type Refusal } from './token/verify.ts';

/** A join the token allows: what it may enter as. */
export interface Verdict {
  frame: JoinFrame;
  claims: TokenClaims;
  roomId: string;
  pinned: boolean;
  /** The token's signature: what a removal bans. */
  signature: string;
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
 * Judge a join frame: the protocol version, the token (steps 1–10) and the removal list.
 * Whether the identity is free is decided at entry, which may come later (after the lobby).
 */
export function judge(relay: RelayContext, frame: JoinFrame): Verdict | Refusal {
  if (frame.v !== PROTOCOL_VERSION) {
    return { code: 'INVALID_ARGUMENT', reason: 'unsupported-version', message: `this relay speaks protocol version ${PROTOCOL_VERSION}, not ${frame.v}` };
  }
  const { config, keys } = relay;
  const now = Date.now() / 1000;
  const verified = verifyToken(frame.token, { keys, maxTtlRoom: config.maxTtlRoom, maxTtlDomain: config.maxTtlDomain, leeway: config.tokenLeeway, now });
  if (!verified.ok) return verified;
  const { claims } = verified;
  const roomId = frame.roomId ?? claims.roomId;
  if (roomId === undefined) {
    return { code: 'INVALID_ARGUMENT', reason: 'room-required', message: 'the token is domain-wide: give roomId in the join options' };
  }
  const scopeRefusal = checkScope(claims, roomId, frame.participantId);
  if (scopeRefusal) return scopeRefusal;
  const signature = frame.token.slice(frame.token.lastIndexOf('.') + 1);
  const pinned = claims.participantId !== undefined;
  if (pinned && relay.bans.has(roomId, signature, now)) {
    return { code: 'UNAUTHORIZED_PARTICIPANT', reason: 'removed', message: 'you were removed from this room: a new token is needed to come back' };
  }
  return { frame, claims, roomId, pinned, signature, ask: claims.joinPolicy?.mode === 'ask' };
}

/** Whether the relay has room for one more participant in `roomId` (a new room included). */
export function capacity(relay: RelayContext, roomId: string): Refusal | null {
  const room = relay.rooms.get(roomId);
  if (!room && relay.rooms.size >= relay.config.maxRooms) {
    return { code: 'RATE_LIMITED', reason: 'too-many-rooms', message: `this relay holds at most ${relay.config.maxRooms} rooms: try again later` };
  }
  if (room && room.size >= relay.config.maxRoomSize) {
    return { code: 'RATE_LIMITED', reason: 'room-full', message: `this room holds at most ${relay.config.maxRoomSize} participants` };
  }
  return null;
}

/**
 * Enter the room: the identity rules (a pinned token takes over, an unpinned one never
 * displaces anyone), then the member is added and the `joined` frame built. Synchronous, so
 * two entries of one identity cannot interleave.
 */
export function enter(relay: RelayContext, verdict: Verdict, link: MemberLink): Admission | Refusal {
  const { frame, claims, roomId, pinned } = verdict;
  const existing = relay.rooms.get(roomId)?.get(frame.participantId);
  if (existing) {
    if (!pinned) {
      return { code: 'UNAUTHORIZED_PARTICIPANT', reason: 'identity-in-use', message: 'this participantId is already in the room and the token does not pin it' };
    }
    existing.link.close(CloseCode.DUPLICATE_IDENTITY, 'duplicate-identity');
  } else {
    const full = capacity(relay, roomId);
    if (full) return full;
  }
  // after a takeover, which may have emptied and dropped the room
  const room = relay.rooms.getOrCreate(roomId);
  const member: Member = {
    id: frame.participantId,
    name: frame.name ?? frame.participantId,
    tier: claims.isViewer === true ? 'viewer' : 'speaker',
    joinedAt: Date.now(),
    grant: effectiveGrant(claims.grant),
    pinned,
    tokenExp: claims.exp,
    tokenSignature: verdict.signature,
    apiKey: claims.iss,
    link,
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
    outputs: room.outputs.statuses(),
    ...(member.grant.canModerate ? { lobby: room.lobby.list() } : {}),
    resume: { credential: relay.seats.issue(member, room, member.apiKey), graceMs: relay.config.resumeGraceMs },
  };
}
