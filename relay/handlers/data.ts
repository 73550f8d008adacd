import type { Params, Result } from '../../src/protocol/messages.ts';
import { requireFlag, Serialized, spend, spendBytes, type RelayContext, type RequestScope } from '../context.ts';
import type { Sender } from '../data/topics.ts';
import type { Room } from '../rooms/types.ts';
import { RelayError } from '../errors.ts';
import { payloadJson } from '../data/raw-json.ts';

/** Refuse a topic name over the relay's length limit. */
export function checkTopic(relay: RelayContext, topic: string): void {
  const max = relay.config.maxTopicLength;
  if (topic.length > max) throw new RelayError('INVALID_ARGUMENT', `topic names are at most ${max} characters`, 'topic-too-long');
}

/**
 * Publish to a room's topic, whoever sends (a member, the server API): the topic and payload
 * limits, then `pay` for the payload's bytes (the sender's budgets), then the topic board.
 */
export function publishFrom(relay: RelayContext, room: Room, from: Sender, params: Params<'pubsub.publish'>, pay: (bytes: number) => void): Result<'pubsub.publish'> {
  checkTopic(relay, params.topic);
  const max = relay.config.maxPayloadBytes;
  const json = payloadJson(params.payload);
  const bytes = typeof json === 'string' ? Buffer.byteLength(json) : json.byteLength;
  if (bytes > max) throw new RelayError('PAYLOAD_TOO_LARGE', `the payload is ${bytes} bytes; the limit is ${max} (use dataStream for large data)`, 'payload-too-large');
  pay(bytes);
  const { message, recipients } = room.topics.publish(from, params.topic, params.payload, params, json);
  return { id: message.id, timestamp: message.timestamp, recipients };
}

export function publish(scope: RequestScope, params: Params<'pubsub.publish'>): Result<'pubsub.publish'> {
  requireFlag(scope.member, 'canPublishData', 'publishing data');
  return publishFrom(scope.relay, scope.room, scope.member, params, (bytes) => spendBytes(scope, bytes));
}

export function subscribe(scope: RequestScope, params: Params<'pubsub.subscribe'>): Result<'pubsub.subscribe'> {
  requireFlag(scope.member, 'canSubscribeData', 'subscribing to data');
  checkTopic(scope.relay, params.topic);
  spend(scope);
  scope.room.topics.subscribe(scope.member, params.topic);
  return {};
}

export function unsubscribe(scope: RequestScope, params: Params<'pubsub.unsubscribe'>): Result<'pubsub.unsubscribe'> {
  spend(scope);
  scope.room.topics.unsubscribe(scope.member, params.topic);
  return {};
}

/**
 * The answer is charged to the reader's byte budget before it is built: a few megabytes of
 * history is not free to ask for in a loop. It holds the newest messages that fit in the byte
 * burst (a larger answer could never be paid for).
 */
export function history(scope: RequestScope, params: Params<'pubsub.history'>): Serialized<Result<'pubsub.history'>> {
  requireFlag(scope.member, 'canSubscribeData', 'reading data history');
  checkTopic(scope.relay, params.topic);
  const { historySize, dataByteBurst, maxPayloadBytes } = scope.relay.config;
  // the byte budget's burst (see LocalPort)
  const burst = Math.max(dataByteBurst, maxPayloadBytes);
  return new Serialized(scope.room.topics.history(scope.member, params.topic, params.limit ?? historySize, burst, (bytes) => spendBytes(scope, bytes)));
}

export function openStream(scope: RequestScope, params: Params<'stream.open'>): Result<'stream.open'> {
  requireFlag(scope.member, 'canPublishData', 'sending a data stream');
  if (params.topic !== undefined) checkTopic(scope.relay, params.topic);
  // what the announcement carries to its recipients is charged like a payload
  spendBytes(scope, (params.name?.length ?? 0) + (params.mimeType?.length ?? 0) + (params.topic?.length ?? 0) + 64);
  return scope.room.streams.open(scope.member, params);
}

export function closeStream(scope: RequestScope, params: Params<'stream.close'>): Result<'stream.close'> {
  scope.room.streams.close(scope.member, params.streamId);
  return {};
}

/** A recipient stops receiving a stream (its reader stopped, or it fell behind in the SDK): nobody's grant is needed. */
export function leaveStream(scope: RequestScope, params: Params<'stream.leave'>): Result<'stream.leave'> {
  if ('streamIds' in params) for (const id of params.streamIds) scope.room.streams.leave(scope.member, id);
  else scope.room.streams.leave(scope.member, params.streamId);
  return {};
}
