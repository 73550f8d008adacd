import type { Method, Params, Result } from '../../src/protocol/messages.ts';
import type { RequestScope, Serialized } from '../context.ts';
import { admitFromLobby, clearBoard, denyFromLobby, draw, requestUnpublish, shapes, startOutput, stopOutput } from './control.ts';
import { closeStream, history, leaveStream, openStream, publish, subscribe, unsubscribe } from './data.ts';
import * as media from './media.ts';
import { endRoom, leaveSession, removeParticipant } from './moderation.ts';
import { listParticipants } from './participants.ts';

/** A request handler: returns the result (or its JSON, already serialised) or throws a `RelayError`. */
export type Handler<M extends Method> = (scope: RequestScope, params: Params<M>) => Result<M> | Serialized<Result<M>> | Promise<Result<M>>;

/** The dispatch table: one handler per method, checked complete by the compiler. */
export const HANDLERS: { readonly [M in Method]: Handler<M> } = {
  'participants.list': listParticipants,
  'room.end': endRoom,
  'participant.remove': removeParticipant,
  'session.leave': leaveSession,
  'pubsub.publish': publish,
  'pubsub.subscribe': subscribe,
  'pubsub.unsubscribe': unsubscribe,
  'pubsub.history': history,
  'stream.open': openStream,
  'stream.close': closeStream,
  'stream.leave': leaveStream,
  'lobby.admit': admitFromLobby,
  'lobby.deny': denyFromLobby,
  'participant.request-unpublish': requestUnpublish,
  'output.start': startOutput,
  'output.stop': stopOutput,
  'whiteboard.draw': draw,
  'whiteboard.clear': clearBoard,
  'whiteboard.shapes': shapes,
  'media.publish': media.publish,
  'media.unpublish': media.unpublish,
  'media.mute': media.mute,
  'media.subscribe': media.subscribe,
  'media.answer': media.answer,
  'media.layer': media.layer,
  'media.unsubscribe': media.unsubscribe,
  'media.force-unpublish': media.forceUnpublish,
};
