import { CloseCode } from '../src/protocol/codes.ts';
import { PROTOCOL_VERSION, type ResumeFrame, type WireError } from '../src/protocol/messages.ts';
import type { RelayContext } from './context.ts';
import { AwayLink } from './seats.ts';
import type { MemberConnection } from './seam.ts';
import type { Member, Room } from './rooms/types.ts';

/** What the resume of a member closed while away is told, by the close code it got. */
const AWAY_ENDINGS: Record<number, WireError> = {
  [CloseCode.REMOVED]: { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'removed', message: 'you were removed from this room' },
  [CloseCode.ROOM_ENDED]: { code: 'ROOM_ENDED', kind: 'State', reason: 'room-ended', message: 'the room has ended' },
  [CloseCode.DUPLICATE_IDENTITY]: { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'duplicate-identity', message: 'you joined this room from elsewhere' },
};

/**
 * Come back to a held seat on `link`: the member, now reached through `link` (its old
 * connection, if it still looked open, is ended quietly), or why not.
 */
export function takeSeat(relay: RelayContext, frame: ResumeFrame, link: MemberConnection): { member: Member; room: Room } | WireError {
  if (frame.v !== PROTOCOL_VERSION) {
    return { code: 'INVALID_ARGUMENT', kind: 'Request', reason: 'unsupported-version', message: `this relay speaks protocol version ${PROTOCOL_VERSION}` };
  }
  const seat = relay.seats.take(frame.credential);
  if (!('member' in seat)) return seat;
  const { member, room } = seat;
  if (!relay.keys.isActive(seat.apiKey)) {
    relay.seats.forget(member);
    const old = member.link;
    member.link = link;
    room.remove(member);
    // an old connection that still looked open ends too (it stayed, answered NOT_CONNECTED, until its heartbeat)
    if (old !== link) old.replaced?.();
    relay.rooms.release(room);
    return { code: 'INVALID_API_KEY', kind: 'Auth', reason: 'revoked-api-key', message: 'the API key of this session has been revoked' };
  }
  // the old connection may still look open (the client gave up on it first): it is replaced
  const old = member.link;
  member.link = link;
  if (old !== link) old.replaced?.();
  // media transports and data streams belonged to the old connection: the SDK starts them again
  room.media.memberLeft(member);
  room.streams.memberLeft(member);
  relay.log.info('resumed', { participant: member.id, room: room.id, project: room.project });
  return { member, room };
}

/**
 * The member's connection dropped (no closing handshake, or a dead heartbeat): it keeps its
 * seat for the grace period, reached through nothing, so that a resume finds it and the others
 * see no blip. Returns false when there is no seat to hold (the member is then to leave).
 */
export function holdSeat(relay: RelayContext, member: Member, room: Room, logged = true): boolean {
  const previous = member.link;
  const away = new AwayLink((code) => {
    // closed while away: removed, room ended, replaced by a new join of the identity
    relay.seats.endWhileAway(member, AWAY_ENDINGS[code] ?? { code: 'NOT_FOUND', kind: 'Request', reason: 'resume-unknown', message: 'the session ended' });
    if (member.link === away) room.remove(member);
    relay.rooms.release(room);
  });
  member.link = away;
  const held = relay.seats.hold(member, relay.config.resumeGraceMs, () => {
    if (member.link !== away) return;
    if (room.remove(member)) relay.log.info('left: did not come back', { participant: member.id, room: room.id });
    relay.rooms.release(room);
  });
  if (!held) {
    member.link = previous;
    return false;
  }
  if (logged) relay.log.info('away: seat held', { participant: member.id, room: room.id, graceMs: relay.config.resumeGraceMs });
  return true;
}
