import { OUTPUT_FLAGS } from '../../src/protocol/control.ts';
import type { Params, Result } from '../../src/protocol/messages.ts';
import { chargeBroadcast, requireFlag, Serialized, spendBroadcast, spendBytes, type RequestScope } from '../context.ts';
import { RelayError } from '../errors.ts';
import { WhiteboardProvider } from '../outputs/whiteboard.ts';

export function admitFromLobby(scope: RequestScope, params: Params<'lobby.admit'>): Result<'lobby.admit'> {
  requireFlag(scope.member, 'canModerate', 'admitting from the lobby');
  return { decisions: params.participantIds.map((id) => scope.room.lobby.decide(id, true, scope.member.id)) };
}

export function denyFromLobby(scope: RequestScope, params: Params<'lobby.deny'>): Result<'lobby.deny'> {
  requireFlag(scope.member, 'canModerate', 'denying from the lobby');
  return { decisions: params.participantIds.map((id) => scope.room.lobby.decide(id, false, scope.member.id)) };
}

/** Ask a participant to stop publishing a source; it decides (`unpublish-requested`). */
export function requestUnpublish(scope: RequestScope, params: Params<'participant.request-unpublish'>): Result<'participant.request-unpublish'> {
  requireFlag(scope.member, 'canModerate', 'asking a participant to unpublish');
  if (params.participantId === scope.member.id) throw new RelayError('INVALID_ARGUMENT', 'to stop your own source, unpublish it', 'self');
  const target = scope.room.get(params.participantId);
  if (!target) throw new RelayError('NOT_FOUND', `no participant "${params.participantId}" in this room`, 'unknown-participant');
  target.link.send({ type: 'event', name: 'unpublish-requested', data: { source: params.source, by: scope.member.id } });
  return {};
}

export function startOutput(scope: RequestScope, params: Params<'output.start'>): Promise<Result<'output.start'>> {
  requireFlag(scope.member, OUTPUT_FLAGS[params.output], `starting ${params.output}`);
  // `starting`, then `active` (or `failed`), to every member
  spendBroadcast(scope, 2);
  return scope.room.outputs.start(params.output, scope.member.id, params.options);
}

export function stopOutput(scope: RequestScope, params: Params<'output.stop'>): Promise<Result<'output.stop'>> {
  requireFlag(scope.member, OUTPUT_FLAGS[params.output], `stopping ${params.output}`);
  // never refused: stopping a recording must not fail for a moderator in debt
  chargeBroadcast(scope, 2);
  return scope.room.outputs.stop(params.output, scope.member.id);
}

function board(scope: RequestScope): WhiteboardProvider {
  const provider = scope.room.outputs.provider('whiteboard') as WhiteboardProvider | undefined;
  if (!provider) throw new RelayError('INVALID_STATE', 'the whiteboard is not active: start it first', 'output-not-active');
  return provider;
}

export function draw(scope: RequestScope, params: Params<'whiteboard.draw'>): Result<'whiteboard.draw'> {
  requireFlag(scope.member, 'canWhiteboard', 'drawing on the whiteboard');
  const provider = board(scope);
  // before the shape's size is measured: a drawer over its rate costs no serialisation
  if (!scope.member.fanout.hasCredit()) throw new RelayError('RATE_LIMITED', 'what you drew recently is still being delivered to many members: slow down', 'fanout-rate');
  const cost = WhiteboardProvider.cost(scope.member.id, params.shape);
  spendBytes(scope, cost);
  const shape = provider.draw(scope.member.id, params.shape);
  scope.member.fanout.spend(cost, scope.room.size);
  return { shape };
}

export function clearBoard(scope: RequestScope): Result<'whiteboard.clear'> {
  requireFlag(scope.member, 'canWhiteboard', 'clearing the whiteboard');
  const provider = board(scope);
  spendBroadcast(scope);
  provider.clear(scope.member.id);
  return {};
}

/** Everyone may look at the board; the answer's size is charged to the asker's byte budget. */
export function shapes(scope: RequestScope): Serialized<Result<'whiteboard.shapes'>> {
  const provider = board(scope);
  spendBytes(scope, provider.bytes);
  return new Serialized(provider.all());
}
