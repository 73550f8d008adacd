/** Wire types of media: publications, subscriptions, and their negotiation. */
import type { Source } from './grant.ts';

/** The kind of a media track. */
export type TrackKind = 'audio' | 'video';

/** The kind each source must be. */
export const SOURCE_KIND: Readonly<Record<Source, TrackKind>> = Object.freeze({ camera: 'video', microphone: 'audio', screen: 'video' });

/** A published track as everyone sees it. */
export interface TrackInfo {
  source: Source;
  kind: TrackKind;
  muted: boolean;
}

/** A simulcast layer as its publisher announces it. */
export interface LayerInfo {
  rid: string;
  width: number;
  height: number;
}

/** The largest video a subscriber wants (e.g. the size of its tile, in pixels). */
export interface PreferredSize {
  maxWidth: number;
  maxHeight: number;
}

/** Methods of media. Each publication and each subscription has its own peer connection. */
export interface MediaMethods {
  /** Publish a source: the client's SDP offer (one sendonly m-line); the relay's answer. */
  'media.publish': { params: { source: Source; kind: TrackKind; sdp: string; layers?: LayerInfo[] }; result: { sdp: string } };
  'media.unpublish': { params: { source: Source }; result: Record<string, never> };
  'media.mute': { params: { source: Source; muted: boolean }; result: Record<string, never> };
  /** Subscribe to a publication: the relay's SDP offer (one sendonly m-line). */
  'media.subscribe': { params: { participantId: string; source: Source; size?: PreferredSize }; result: { subscriptionId: string; sdp: string } };
  /** Ask for the simulcast layer that best fits a size; the relay switches at the next key frame. */
  'media.layer': { params: { subscriptionId: string; size: PreferredSize }; result: { layer: string } };
  /** The client's answer to a subscription's offer. */
  'media.answer': { params: { subscriptionId: string; sdp: string }; result: Record<string, never> };
  'media.unsubscribe': { params: { subscriptionId: string }; result: Record<string, never> };
  /** Moderators: stop forwarding a participant's source and tell everyone. */
  'media.force-unpublish': { params: { participantId: string; source: Source }; result: Record<string, never> };
}

/** Events of media. */
export interface MediaEvents {
  /** Everyone: an on-stage participant published a source. */
  'track-published': TrackInfo & { participantId: string };
  /**
   * Everyone else: an announced publication ended (unpublished, force-unpublished, its publisher
   * left, or its transport failed). Also to the publisher itself, naming itself, when the relay
   * ended one of its publications on its own (its transport never connected, or failed later);
   * the SDK then rejects the pending `publish()`, or ends the publication, with `CONNECTION_FAILED`.
   */
  'track-unpublished': { participantId: string; source: Source };
  /** Everyone: a publication was muted or unmuted. */
  'track-mute': { participantId: string; source: Source; muted: boolean };
  /** To a subscriber: a subscription ended on the relay's side (its publication ended). */
  'subscription-ended': { subscriptionId: string };
  /** To the publisher: a moderator stopped one of its sources. */
  'force-unpublished': { source: Source; by: string };
}
