import { call } from '../emitter.ts';
import type { SdkError } from '../errors.ts';
import type { Source } from '../protocol/grant.ts';
import type { PreferredSize, TrackKind } from '../protocol/media.ts';

/** What a publication needs from the media manager. */
export interface PublicationActions {
  subscribe(publication: RemoteTrackPublication): Promise<void>;
  setPreferredSize(publication: RemoteTrackPublication, size: PreferredSize): Promise<void>;
  unsubscribe(publication: RemoteTrackPublication): Promise<void>;
  setMuted(publication: LocalTrackPublication, muted: boolean): Promise<void>;
  replaceTrack(publication: LocalTrackPublication, track: MediaStreamTrack): Promise<void>;
  switchDevice(publication: LocalTrackPublication, deviceId: string): Promise<void>;
}

// written out where used, not named: src/index.ts exports the classes, and typedoc documents only exported names
type LocalPublicationState = 'published' | 'unpublished' | 'failed';
type LocalPublicationEnd = { state: 'unpublished' | 'failed'; error?: SdkError };

/**
 * A track you publish. It exists once the relay has it: `publish()` resolves when the media
 * connection is up and the relay has announced it to the room.
 */
export class LocalTrackPublication {
  #muted = false;
  #track: MediaStreamTrack;
  #state: LocalPublicationState = 'published';
  #error: SdkError | null = null;
  readonly #ended = new Set<(end: LocalPublicationEnd) => void>();

  /** @internal */
  constructor(
    /** `camera`, `microphone` or `screen`. */
    readonly source: Source,
    readonly kind: TrackKind,
    track: MediaStreamTrack,
    /** @internal Whether the SDK acquired the track (and so stops it on unpublish or replacement). */
    public acquired: boolean,
    /** @internal Its connection to the relay (replaced when it is published again after a reconnection). */
    public pc: RTCPeerConnection,
    private readonly actions: PublicationActions,
    /** @internal How it was published (again after a reconnection). */
    readonly simulcast: boolean,
  ) {
    this.#track = track;
  }

  /** The track sent to the relay (a new one after `replaceTrack` or `switchDevice`). */
  get track(): MediaStreamTrack {
    return this.#track;
  }

  /**
   * `published`: the relay announced it and forwards it. `unpublished`: you, a moderator or the
   * end of the session stopped it. `failed`: its media connection to the relay failed (`error`).
   */
  get state(): 'published' | 'unpublished' | 'failed' {
    return this.#state;
  }

  /** Why it failed, when `state` is `failed`. */
  get error(): SdkError | null {
    return this.#error;
  }

  /**
   * Call `listener` once when it ends, whatever the cause (at once if it has): `state` is
   * `unpublished` or `failed`, and `error` (`CONNECTION_FAILED`, reason `media-transport-failed`)
   * says why it failed. Returns a function that removes the listener.
   *
   * @example
   * ```ts
   * camera.onEnded(({ state, error }) => state === 'failed' && showError(error));
   * ```
   */
  onEnded(listener: (end: { state: 'unpublished' | 'failed'; error?: SdkError }) => void): () => void {
    if (this.#state !== 'published') {
      listener(this.#end());
      return () => undefined;
    }
    this.#ended.add(listener);
    return () => this.#ended.delete(listener);
  }

  #end(): LocalPublicationEnd {
    return this.#error ? { state: this.#state as 'failed', error: this.#error } : { state: this.#state as 'unpublished' };
  }

  /**
   * Send another track instead, without renegotiating (e.g. another camera); its kind must
   * match. A track the SDK had captured is stopped; the new one is yours and never stopped by
   * the SDK. Others keep receiving the publication, uninterrupted.
   */
  replaceTrack(track: MediaStreamTrack): Promise<void> {
    return this.actions.replaceTrack(this, track);
  }

  /**
   * Switch to another capture device (`deviceId` from `navigator.mediaDevices.enumerateDevices()`):
   * the SDK captures it, sends it instead, and stops the track it had captured.
   */
  switchDevice(deviceId: string): Promise<void> {
    return this.actions.switchDevice(this, deviceId);
  }

  /** @internal */
  setTrack(track: MediaStreamTrack, acquired: boolean): void {
    this.#track = track;
    this.acquired = acquired;
  }

  /** @internal It ended: listeners are called once. */
  setEnded(state: Exclude<LocalPublicationState, 'published'>, error?: SdkError): void {
    if (this.#state !== 'published') return;
    this.#state = state;
    this.#error = error ?? null;
    const end = this.#end();
    // an integrator's listener that throws is reported, as every listener's is: it must not stop
    // the others, or the leave, unpublish or moderation that ended the publication
    for (const listener of [...this.#ended]) call(listener, end);
    this.#ended.clear();
  }

  /** Whether it is muted (no media is sent; everyone sees `track-muted`). */
  get muted(): boolean {
    return this.#muted;
  }

  /**
   * Stop sending media without unpublishing; others get `track-muted`. The media stops at once;
   * `muted` becomes `true` when the relay has accepted. If the relay refuses, the promise rejects
   * and nothing changed: `muted` is still `false` and the media flows again.
   */
  mute(): Promise<void> {
    return this.actions.setMuted(this, true);
  }

  /**
   * Send media again; others get `track-unmuted`. The media flows, and `muted` becomes `false`,
   * once the relay has accepted; if it refuses, the promise rejects and the track stays muted.
   */
  unmute(): Promise<void> {
    return this.actions.setMuted(this, false);
  }

  /** @internal */
  setMutedState(muted: boolean): void {
    this.#muted = muted;
  }

  /** WebRTC statistics of this publication's connection (`outbound-rtp` and friends). */
  getStats(): Promise<RTCStatsReport> {
    return this.pc.getStats();
  }
}

/**
 * A track another participant publishes. `subscribe()` receives it (needs `canSubscribe`,
 * decided by the relay); `track` is then the `MediaStreamTrack` to play.
 *
 * @example
 * ```ts
 * room.on('track-subscribed', ({ participant, track }) => {
 *   tileOf(participant).srcObject = new MediaStream([track]);
 * });
 * ```
 */
export class RemoteTrackPublication {
  #muted: boolean;
  #track: MediaStreamTrack | null = null;
  /** @internal The relay's subscription, while subscribing or subscribed. */
  subscription: {
    id: string | null;
    pc: RTCPeerConnection;
    done: Promise<void>;
    cancel: () => void;
    /** The size the relay has for it (sent with the subscribe or a layer request). */
    sentSize?: PreferredSize | undefined;
    /** The layer requests under way, while any is. */
    sizing?: Promise<void> | null;
    /** When the last layer request was sent (ms, the wall clock). */
    sizedAt?: number;
  } | null = null;
  /** @internal */
  preferredSize: PreferredSize | undefined;

  /** @internal */
  constructor(
    /** Who publishes it. */
    readonly participantId: string,
    /** `camera`, `microphone` or `screen`. */
    readonly source: Source,
    readonly kind: TrackKind,
    muted: boolean,
    private readonly actions: PublicationActions,
  ) {
    this.#muted = muted;
  }

  /** Whether the publisher has muted it. */
  get muted(): boolean {
    return this.#muted;
  }

  /** The received track, while subscribed. */
  get track(): MediaStreamTrack | null {
    return this.#track;
  }

  /** Whether you receive it now. */
  get subscribed(): boolean {
    return this.#track !== null;
  }

  /** Receive it; resolves once the track has arrived. */
  subscribe(): Promise<void> {
    return this.actions.subscribe(this);
  }

  /**
   * The largest video you want (e.g. your tile's size in pixels). For a simulcast publication
   * the relay then forwards the layer that fits, switching at the next key frame. Calls are
   * coalesced: one request to the relay at a time per subscription, at most one every 500 ms,
   * then only the latest size (a size the relay already has sends nothing), so a
   * `ResizeObserver` may call it on every frame. Each request spends the member's message
   * budget; past it the promise rejects `RATE_LIMITED` and the next call sends the latest size
   * again.
   *
   * @example
   * ```ts
   * new ResizeObserver(() => publication.setPreferredSize({ maxWidth: tile.clientWidth, maxHeight: tile.clientHeight })).observe(tile);
   * ```
   */
  setPreferredSize(size: PreferredSize): Promise<void> {
    return this.actions.setPreferredSize(this, size);
  }

  /** Stop receiving it. */
  unsubscribe(): Promise<void> {
    return this.actions.unsubscribe(this);
  }

  /** @internal */
  setMutedState(muted: boolean): void {
    this.#muted = muted;
  }

  /** @internal */
  setTrack(track: MediaStreamTrack | null): void {
    this.#track = track;
  }

  /** WebRTC statistics of the subscription (`inbound-rtp`: frames decoded, packets lost...); `null` when not subscribed. */
  async getStats(): Promise<RTCStatsReport | null> {
    return this.subscription ? this.subscription.pc.getStats() : null;
  }
}
