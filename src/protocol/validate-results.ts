/**
 * The SDK's parsers of the result of every method: one per method, in a typed table. A result
 * that does not parse means the relay broke the protocol (not the caller's fault).
 */
import type { LobbyDecision, OutputName } from './control.ts';
import type { Method, Params, Result } from './messages.ts';
import { MAX_STREAM_CHUNK_BYTES, MAX_STREAM_WINDOW } from './messages.ts';
import { bad, isRecord, ok, type Parsed } from './parse.ts';
import {
  fitList,
  fitLobbyDecision,
  intIn,
  isStreamId,
  isPubSubMessage,
  isShape,
  isString,
  list,
  parseOutputStatus,
  parseParticipantPage,
  parsePublished,
  record,
  type Guard,
} from './validate-server-values.ts';

/** A parser of one method's result; `params` are the request's (e.g. which output it started). */
export type ResultParser<M extends Method> = (result: unknown, params: Params<M>) => Parsed<Result<M>>;

const empty = (result: unknown): Parsed<Record<string, never>> => (isRecord(result) ? ok({}) : bad('must be an object'));

/** `{ [field]: T[] }`, every element checked in place. */
function listIn<F extends string, T>(field: F, guard: Guard<T>) {
  return (result: unknown): Parsed<{ [K in F]: T[] }> => {
    if (!isRecord(result)) return bad('must be an object');
    const items = list(field, result[field], guard);
    return items.ok ? ok({ [field]: items.value } as { [K in F]: T[] }) : items;
  };
}

/** `{ decisions }`: an admission checked in place, a refusal's error normalised. */
const decisions = (result: unknown): Parsed<{ decisions: LobbyDecision[] }> => {
  if (!isRecord(result)) return bad('must be an object');
  const items = fitList('decisions', result.decisions, fitLobbyDecision);
  return items.ok ? ok({ decisions: items.value }) : items;
};
const status = (result: unknown, params: { output: OutputName }) => parseOutputStatus(params.output, result);

/** One parser per method: the typed dispatch table of result validation. */
const RESULTS: { [M in Method]: ResultParser<M> } = {
  'lobby.admit': decisions,
  'lobby.deny': decisions,
  'participant.request-unpublish': empty,
  'output.start': status,
  'output.stop': status,
  'whiteboard.draw': record({ shape: isShape }),
  'whiteboard.clear': empty,
  'whiteboard.shapes': listIn('shapes', isShape),
  'media.publish': record({ sdp: isString }),
  'media.unpublish': empty,
  'media.mute': empty,
  'media.subscribe': record({ subscriptionId: isString, sdp: isString }),
  'media.layer': record({ layer: isString }),
  'media.answer': empty,
  'media.unsubscribe': empty,
  'media.force-unpublish': empty,
  'participants.list': parseParticipantPage,
  'room.end': empty,
  'participant.remove': empty,
  'session.leave': empty,
  'pubsub.publish': parsePublished,
  'pubsub.subscribe': empty,
  'pubsub.unsubscribe': empty,
  'pubsub.history': listIn('messages', isPubSubMessage),
  // a chunk of 0 bytes made a send loop for ever, a window below 1 wait for ever; and a window
  // past any relay's (16 chunks of 64 KiB by default) let a relay that stopped reading have the
  // whole source read into the socket
  'stream.open': record({ streamId: isStreamId, chunkBytes: intIn(1, MAX_STREAM_CHUNK_BYTES), window: intIn(1, MAX_STREAM_WINDOW) }),
  'stream.close': empty,
  'stream.leave': empty,
};

/** Validate the result of a request of `method` made with `params`. */
export function parseResult<M extends Method>(method: M, result: unknown, params: Params<M>): Parsed<Result<M>> {
  const parsed = (RESULTS[method] as ResultParser<M> | undefined)?.(result, params);
  return parsed ?? bad(`unknown method ${method}`);
}
