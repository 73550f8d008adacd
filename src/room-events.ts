import type { DisconnectReason } from './protocol/codes.ts';
import type { LobbyOutcome, LobbyRequest, OutputChange, Shape } from './protocol/control.ts';
import type { Source } from './protocol/grant.ts';
import type { ParticipantCounts } from './protocol/messages.ts';
import type { Transcript } from './protocol/transcript.ts';
import type { RemoteParticipant } from './participants/remote-participant.ts';
import type { LocalTrackPublication, RemoteTrackPublication } from './media/publications.ts';
import type { SdkError } from './errors.ts';

/** The payload of the remote track events. */
export interface TrackEvent {
  participant: RemoteParticipant;
  publication: RemoteTrackPublication;
}

/**
 * Every event of a {@link Room}, with its one payload object. Listen with `room.on(name, fn)`.
 */
export interface RoomEvents {
  /**
   * An on-stage participant is in the room. Retroactive: a listener added after the join is
   * called once for every on-stage participant already present (in join order, after `on()`
   * returns), then for each later one. Audience members never fire it.
   */
  'participant-joined': { participant: RemoteParticipant };
  /** An on-stage participant left. Not retroactive. Audience members never fire it. */
  'participant-left': { participant: RemoteParticipant };
  /**
   * The room's counts changed (you included). Coalesced by the relay: at most one per window
   * (500 ms by default), only when a value changed, the settled value within one window.
   */
  'participant-count-changed': ParticipantCounts;
  /**
   * For moderators: a joiner waits in the lobby. Retroactive: a late listener first gets every
   * request already waiting.
   */
  'lobby-request': LobbyRequest;
  /** For moderators: a lobby request ended (`admitted`, `denied`, `timeout`, `cancelled`). */
  'lobby-resolved': { participantId: string; outcome: LobbyOutcome; by?: string };
  /** A moderator asks you to stop publishing a source; you decide. */
  'unpublish-requested': { source: Source; by: string };
  /** An output changed state (everyone gets it). */
  'output-changed': OutputChange;
  /** A shape was drawn on the whiteboard. */
  'whiteboard-shape': { shape: Shape };
  /** The whiteboard was cleared. */
  'whiteboard-cleared': { by: string };
  /**
   * An utterance of a participant's microphone was recognised, while the room's `transcription`
   * output runs. Only members whose grant has `canSubscribeData` get it (yours included); one
   * event per utterance, once silence follows it (`final: true`).
   *
   * @example
   * ```ts
   * room.on('transcription', ({ participantId, text, endedAt }) => {
   *   if (text) showCaption(participantId, text, new Date(endedAt));
   * });
   * await room.transcription.start({ language: 'en' });   // canTranscribe
   * ```
   */
  transcription: Transcript;
  /**
   * A participant published a source after it appeared (tracks present when it appears are in
   * `participant.tracks`). With `autoSubscribe` (default) a subscription follows.
   */
  'track-published': TrackEvent;
  /** A publication ended (unpublished, stopped by a moderator, or its publisher left). */
  'track-unpublished': TrackEvent;
  /** A subscribed track arrived: play `track`. */
  'track-subscribed': TrackEvent & { track: MediaStreamTrack };
  /** You no longer receive a track. */
  'track-unsubscribed': TrackEvent;
  /** A subscription could not be set up (e.g. `INVALID_PERMISSIONS` without `canSubscribe`). */
  'track-subscription-failed': TrackEvent & { error: SdkError };
  'track-muted': TrackEvent;
  'track-unmuted': TrackEvent;
  /** One of your publications ended: you unpublished it, or a moderator stopped it. */
  'local-track-unpublished': {
    publication: LocalTrackPublication;
    /** `failed`: the relay could not keep the track (its connection never came up, or dropped); `error` says why. */
    reason: 'unpublished' | 'force-unpublished' | 'failed';
    by?: string;
    error?: SdkError;
  };
  /** The connection dropped; the SDK is re-establishing it. Calls made now wait. */
  reconnecting: Record<string, never>;
  /**
   * A reconnection waits in the lobby: the relay had lost the session (it restarted, or the
   * seat's grace ran out) and your token asks for entry, so the rejoin waits for a moderator, as
   * `onWaiting` of `Sdk.join()` does. `reconnected` follows if you are admitted; `disconnected`
   * with `denied` if a moderator denies it; with `connection-lost` when the lobby's `ttl` runs
   * out, or the reconnection's `maxTimeMs` does first (the wait is cut there, whatever `ttl`
   * says). Said each time a rejoin is held: if the held socket drops, the reconnection tries
   * again (`reconnecting` is not said again) and may be held, and say so, once more. Calls made
   * meanwhile wait, as during any reconnection.
   *
   * @example
   * ```ts
   * room.on('reconnect-waiting', () => showBanner('Reconnecting: waiting for the host to let you back in'));
   * room.on('reconnected', () => hideBanner());
   * ```
   */
  'reconnect-waiting': { requestedAt: number; ttl: number };
  /**
   * The connection is back and the room's state reconciled: joins and leaves that happened
   * meanwhile have been delivered (each once), counts, lobby and outputs updated, subscriptions
   * and media re-established. `resumed`: the same session went on (else the relay had lost it
   * and the SDK joined again with the token).
   */
  reconnected: { resumed: boolean };
  /** The session ended; `reason` says why. No event follows. */
  disconnected: { reason: DisconnectReason };
  /**
   * Something went wrong that no call of yours is waiting for; the session goes on. Either the
   * relay's own `error` frame, with the relay's code (it answers traffic that was not a
   * request, e.g. a binary frame you sent that is not a stream chunk), or the relay broke the
   * protocol and the frame was dropped: a frame of an unknown type, one that is not JSON, an
   * event whose data is malformed (`INTERNAL_ERROR`, reason `bad-frame`), a binary frame that is
   * not a stream chunk (`INTERNAL_ERROR`, `bad-chunk`). Also a part of the room that could not be
   * brought up to date after a reconnection (the others still are, and `reconnected` follows). A malformed answer to a call rejects
   * that call instead. An event this SDK does not know (from a newer relay) is ignored, not
   * reported. Errors in frames that arrive before `Sdk.join()` resolves are emitted before any
   * listener can be added.
   *
   * @example
   * ```ts
   * room.on('error', ({ error }) => console.warn('tessera:', error.code, error.reason, error.message));
   * ```
   */
  error: { error: SdkError };
}

/** The name of a room event. */
export type RoomEventName = keyof RoomEvents;
