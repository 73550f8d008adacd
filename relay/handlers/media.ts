import type { Params, Result } from '../../src/protocol/messages.ts';
import { chargeBroadcast, requireFlag, spend, spendBroadcast, type RequestScope } from '../context.ts';
import { RelayError } from '../errors.ts';

export async function publish(scope: RequestScope, params: Params<'media.publish'>): Promise<Result<'media.publish'>> {
  const { member, room } = scope;
  requireFlag(member, 'canPublish', 'publishing media');
  if (!member.grant.canPublishSources.includes(params.source)) {
    throw new RelayError('INVALID_PERMISSIONS', `the token does not allow publishing ${params.source} (canPublishSources)`, 'source-not-allowed');
  }
  if (member.tier === 'viewer') throw new RelayError('INVALID_ARGUMENT', 'audience members are not on stage and do not publish', 'viewer-cannot-publish');
  // a negotiation costs the relay a peer connection and an SDP parse, and the track is announced to the room
  spendBroadcast(scope);
  return { sdp: await room.media.publish(member, params.source, params.kind, params.sdp, params.layers) };
}

export function unpublish(scope: RequestScope, params: Params<'media.unpublish'>): Result<'media.unpublish'> {
  chargeBroadcast(scope);
  scope.room.media.unpublish(scope.member, params.source);
  return {};
}

export function mute(scope: RequestScope, params: Params<'media.mute'>): Result<'media.mute'> {
  // a mute is never refused (the SDK has already stopped the media); an unmute waits for the budget
  if (params.muted) chargeBroadcast(scope);
  else spendBroadcast(scope);
  scope.room.media.mute(scope.member, params.source, params.muted);
  return {};
}

/**
 * Messages of the member's budget a subscription ended within {@link CHURN_MS} of its making
 * costs, in all: a peer connection made, an offer built, a socket bound, and torn down again,
 * work done after the request's turn. Four members of one shared token subscribing and
 * unsubscribing in a loop at one message each (200–440 a second) held the relay up to 123 ms at
 * a time. A subscription that lives costs one, so that a member joining a room of 100
 * publications subscribes to all of them within its burst.
 */
export const CHURN_MESSAGES = 6;
export const CHURN_MS = 5000;

export async function subscribe(scope: RequestScope, params: Params<'media.subscribe'>): Promise<Result<'media.subscribe'>> {
  requireFlag(scope.member, 'canSubscribe', 'subscribing to media');
  spend(scope);
  const { subscriptionId, sdp, superseded } = await scope.room.media.subscribe(scope.member, scope.room.get(params.participantId), params.source, params.size);
  // replacing its own subscription soon after making it is churn too
  if (superseded !== undefined && superseded < CHURN_MS) scope.limiter.spend(CHURN_MESSAGES - 1);
  return { subscriptionId, sdp };
}

export function layer(scope: RequestScope, params: Params<'media.layer'>): Result<'media.layer'> {
  // a switch may ask the publisher for a key frame: a request like any other
  spend(scope);
  return { layer: scope.room.media.setSize(scope.member, params.subscriptionId, params.size) };
}

export async function answer(scope: RequestScope, params: Params<'media.answer'>): Promise<Result<'media.answer'>> {
  spend(scope);
  await scope.room.media.answer(scope.member, params.subscriptionId, params.sdp);
  return {};
}

export function unsubscribe(scope: RequestScope, params: Params<'media.unsubscribe'>): Result<'media.unsubscribe'> {
  // what makes the relay send less is never refused; it is counted while there is budget, and a
  // subscription ended soon after it was made pays for the churn, into debt: the member's next
  // requests wait for it (taking only what was left, subscriptions sent ahead of their
  // unsubscribes still went at one message each)
  let lived: number;
  try {
    lived = scope.room.media.unsubscribe(scope.member, params.subscriptionId);
  } catch (err) {
    scope.limiter.takeUpTo(1);
    throw err;
  }
  if (lived < CHURN_MS) scope.limiter.spend(CHURN_MESSAGES - 1);
  else scope.limiter.takeUpTo(1);
  return {};
}

export function forceUnpublish(scope: RequestScope, params: Params<'media.force-unpublish'>): Result<'media.force-unpublish'> {
  requireFlag(scope.member, 'canModerate', 'stopping a participant\'s media');
  const target = scope.room.get(params.participantId);
  if (!target) throw new RelayError('NOT_FOUND', `no participant "${params.participantId}" in this room`, 'unknown-participant');
  chargeBroadcast(scope);
  scope.room.media.forceUnpublish(target, params.source, scope.member.id);
  return {};
}
