import type { Source } from '../protocol/grant.ts';
import type { PreferredSize, TrackKind } from '../protocol/media.ts';

/** What a publication needs from the media manager. */
export interface PublicationActions {
  subscribe(publication: RemoteTrackPublication): Promise<void>;
  setPreferredSize(publication: RemoteTrackPublication, size: PreferredSize): Promise<void>;
  unsubscribe(publication: RemoteTrackPublication): Promise<void>;
  setMuted(publication: LocalTrackPublication, muted: boolean): Promise<void>;
}

/** A track you publish. */
export class LocalTrackPublication {
  #muted = false;

  /** @internal */
  constructor(
    /** `camera`, `microphone` or `screen`. */
    readonly source: Source,
    readonly kind: TrackKind,
    /** The track sent to the relay. */
    readonly track: MediaStreamTrack,
    /** @internal Whether the SDK acquired the track (and so stops it on unpublish). */
    readonly acquired: boolean,
    /** @internal Its connection to the relay (replaced when it is published again after a reconnection). */
    public pc: RTCPeerConnection,
    private readonly actions: PublicationActions,
    /** @internal How it was published (again after a reconnection). */
    readonly simulcast: boolean,
  ) {}

  /** Whether it is muted (no media is sent; everyone sees `track-muted`). */
  get muted(): boolean {
    return this.#muted;
  }

  /** Stop sending media without unpublishing; others get `track-muted`. */
  mute(): Promise<void> {
    return this.actions.setMuted(this, true);
  }

  /** Send media again; others get `track-unmuted`. */
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
  subscription: { id: string | null; pc: RTCPeerConnection } | null = null;
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
   * the relay then forwards the layer that fits, switching at the next key frame.
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
