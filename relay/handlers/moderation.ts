import { CloseCode } from '../../src/protocol/codes.ts';
import type { Params, Result } from '../../src/protocol/messages.ts';
import { requireFlag, type RelayContext, type RequestScope } from '../context.ts';
import { RelayError } from '../errors.ts';
import type { Member, Room } from '../rooms/types.ts';

/**
 * End a room, whoever asks (a moderator, the server API): it is gone from the registry at once,
 * its lobby refused; `later` runs the closing of every session (a moderator's own included,
 * after its answer).
 */
export function endRoomFor(relay: RelayContext, room: Room, by: string, later: (fn: () => void) => void): void {
  relay.log.info('room ended', { room: room.id, by });
  relay.rooms.delete(room);
  room.lobby.clear({ code: 'ENTRY_DENIED', kind: 'Lobby', message: 'the room has ended', reason: 'room-ended' });
  later(() => closeInTurns(relay, [...room.members()]));
}

/** Sessions an ended room closes in one turn of the event loop. */
export const END_CLOSES_PER_TURN = 256;

/**
 * Close an ended room's sessions, {@link END_CLOSES_PER_TURN} a turn: all in one loop held the
 * relay 390–470 ms for a room of 10,000 (a close frame written to each), every room waiting.
 * Those not yet closed are answered `ROOM_ENDED`, since the room is out of the registry.
 */
function closeInTurns(relay: RelayContext, members: Member[], from = 0): void {
  const until = Math.min(members.length, from + END_CLOSES_PER_TURN);
  for (let i = from; i < until; i++) {
    try {
      members[i]!.link.close(CloseCode.ROOM_ENDED, 'room-ended');
    } catch (err) {
      relay.log.error('closing a session of an ended room failed', { error: err instanceof Error ? err.message : String(err) });
    }
  }
  if (until < members.length) setImmediate(() => closeInTurns(relay, members, until));
}

/** Remove a member, whoever asks; its token cannot bring it back, pinned or not. */
export function removeMemberFor(relay: RelayContext, room: Room, target: Member, by: string): void {
  // pinned or not: an unpinned token would otherwise come straight back under a new id
  relay.bans.add(room.project, room.id, target.tokenKey, target.tokenExp + relay.config.tokenLeeway);
  relay.log.info('participant removed', { participant: target.id, room: room.id, by });
  target.link.close(CloseCode.REMOVED, 'removed');
}

/** `room.end`: close every session of the room; the next join starts a new session of it. */
export function endRoom(scope: RequestScope): Result<'room.end'> {
  requireFlag(scope.member, 'canModerate', 'ending the room');
  endRoomFor(scope.relay, scope.room, scope.member.id, (fn) => scope.after(fn));
  return {};
}

/** `participant.remove`: close the target's session; a pinned token cannot bring it back. */
export function removeParticipant(scope: RequestScope, params: Params<'participant.remove'>): Result<'participant.remove'> {
  requireFlag(scope.member, 'canModerate', 'removing a participant');
  const { relay, room, member } = scope;
  if (params.participantId === member.id) throw new RelayError('INVALID_ARGUMENT', 'you cannot remove yourself; leave the room instead', 'self');
  const target = room.get(params.participantId);
  if (!target) throw new RelayError('NOT_FOUND', `no participant "${params.participantId}" in this room`, 'unknown-participant');
  removeMemberFor(relay, room, target, member.id);
  return {};
}

/** `session.leave`: out of the room now; the socket closes after the answer. */
export function leaveSession(scope: RequestScope): Result<'session.leave'> {
  const { room, member } = scope;
  room.remove(member);
  scope.after(() => member.link.close(CloseCode.LEFT, 'left'));
  return {};
}
