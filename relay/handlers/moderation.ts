import { CloseCode } from '../../src/protocol/codes.ts';
import type { Params, Result } from '../../src/protocol/messages.ts';
import { requireFlag, type RequestScope } from '../context.ts';
import { RelayError } from '../errors.ts';

/** `room.end`: close every session of the room; the next join starts a new session of it. */
export function endRoom(scope: RequestScope): Result<'room.end'> {
  requireFlag(scope.member, 'canModerate', 'ending the room');
  const { relay, room, member } = scope;
  relay.log.info('room ended', { room: room.id, by: member.id });
  relay.rooms.delete(room);
  room.lobby.clear({ code: 'ENTRY_DENIED', kind: 'Lobby', message: 'the room has ended', reason: 'room-ended' });
  // after the response: the caller's own session is closed too
  scope.after(() => {
    for (const m of [...room.members()]) m.link.close(CloseCode.ROOM_ENDED, 'room-ended');
  });
  return {};
}

/** `participant.remove`: close the target's session; a pinned token cannot bring it back. */
export function removeParticipant(scope: RequestScope, params: Params<'participant.remove'>): Result<'participant.remove'> {
  requireFlag(scope.member, 'canModerate', 'removing a participant');
  const { relay, room, member } = scope;
  if (params.participantId === member.id) throw new RelayError('INVALID_ARGUMENT', 'you cannot remove yourself; leave the room instead', 'self');
  const target = room.get(params.participantId);
  if (!target) throw new RelayError('NOT_FOUND', `no participant "${params.participantId}" in this room`, 'unknown-participant');
  // pinned or not: an unpinned token would otherwise come straight back under a new id
  relay.bans.add(room.project, room.id, target.tokenKey, target.tokenExp + relay.config.tokenLeeway);
  relay.log.info('participant removed', { participant: target.id, room: room.id, by: member.id });
  target.link.close(CloseCode.REMOVED, 'removed');
  return {};
}

/** `session.leave`: out of the room now; the socket closes after the answer. */
export function leaveSession(scope: RequestScope): Result<'session.leave'> {
  const { room, member } = scope;
  room.remove(member);
  scope.after(() => member.link.close(CloseCode.LEFT, 'left'));
  return {};
}
