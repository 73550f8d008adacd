import type { EffectiveGrant, Source } from '../protocol/grant.ts';
import type { Media, PublishTrackOptions } from '../media/media.ts';
import type { LocalTrackPublication } from '../media/publications.ts';
import type { SelfInfo } from '../protocol/messages.ts';

/** You, in the room. */
export class LocalParticipant {
  /** Your identity (from the join options, the token, or generated). */
  readonly id: string;
  readonly name: string;
  /** True when your token put you in the audience. */
  readonly isViewer: boolean;
  /**
   * Your grant, as the relay reports it (defaults applied). For display only: the SDK never
   * refuses an action because of it; the relay does.
   */
  readonly grant: Readonly<EffectiveGrant>;
  /** Unix milliseconds at which you joined. */
  readonly joinedAt: number;

  /** @internal */
  constructor(
    self: SelfInfo,
    private readonly media: Media,
  ) {
    this.id = self.id;
    this.name = self.name;
    this.isViewer = self.isViewer;
    this.grant = Object.freeze({ ...self.grant, canPublishSources: [...self.grant.canPublishSources] });
    this.joinedAt = self.joinedAt;
    media.bindSelf(self.id);
  }

  /** Your publications, by source. */
  get tracks(): ReadonlyMap<Source, LocalTrackPublication> {
    return this.media.publications;
  }

  /**
   * Publish `camera`, `microphone` or `screen`: the given track, or one the SDK captures
   * (and then stops on unpublish; a track you give is never stopped by the SDK). The relay
   * checks `canPublish` and `canPublishSources`. Resolves once the media connection is up and
   * the relay has announced the publication to the room; rejects with `CONNECTION_FAILED`
   * (`media-not-connected`) when it does not come up. Calls on one source (publish, unpublish,
   * mute, replaceTrack) take effect in the order they were made, even without awaiting each;
   * different sources are published side by side.
   *
   * @example
   * ```ts
   * const camera = await room.localParticipant.publish('camera');
   * preview.srcObject = new MediaStream([camera.track]);
   * await camera.mute();
   * ```
   */
  publish(source: Source, track?: MediaStreamTrack, options?: PublishTrackOptions): Promise<LocalTrackPublication> {
    return this.media.publish(source, track, options);
  }

  /** Stop publishing a source (after any earlier call on it has settled). */
  unpublish(source: Source): Promise<void> {
    return this.media.unpublish(source);
  }
}
