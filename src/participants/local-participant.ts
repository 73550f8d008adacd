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
  }

  /** Your publications, by source. */
  get tracks(): ReadonlyMap<Source, LocalTrackPublication> {
    return this.media.publications;
  }

  /**
   * Publish `camera`, `microphone` or `screen`: the given track, or one the SDK captures
   * (and then stops on unpublish; a track you give is never stopped by the SDK). The relay
   * checks `canPublish` and `canPublishSources`.
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

  /** Stop publishing a source. */
  unpublish(source: Source): Promise<void> {
    return this.media.unpublish(source);
  }
}
