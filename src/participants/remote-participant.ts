import type { Source } from '../protocol/grant.ts';
import type { ParticipantInfo } from '../protocol/messages.ts';
import type { RemoteTrackPublication } from '../media/publications.ts';
import { ReadOnlyMap } from './read-only-map.ts';

/** What a remote participant needs from its room to act on it. */
export interface RemoteActions {
  remove(participantId: string): Promise<void>;
  requestUnpublish(participantId: string, source: Source): Promise<void>;
  forceUnpublish(participantId: string, source: Source): Promise<void>;
}

/**
 * An on-stage participant other than you. Audience members are never represented by one.
 */
export class RemoteParticipant {
  /** Stable identity. */
  readonly id: string;
  /** Display name. */
  readonly name: string;
  /** Unix milliseconds at which it joined the room. */
  readonly joinedAt: number;
  /** @internal */
  readonly trackMap = new ReadOnlyMap<Source, RemoteTrackPublication>();

  /** @internal */
  constructor(
    info: ParticipantInfo,
    private readonly actions: RemoteActions,
  ) {
    this.id = info.id;
    this.name = info.name;
    this.joinedAt = info.joinedAt;
  }

  /**
   * Remove this participant from the room (needs `canModerate`; the relay decides).
   *
   * @example
   * ```ts
   * await room.remoteParticipants.get('heckler')?.remove();
   * ```
   */
  remove(): Promise<void> {
    return this.actions.remove(this.id);
  }

  /** What it publishes, by source. */
  get tracks(): ReadonlyMap<Source, RemoteTrackPublication> {
    return this.trackMap;
  }

  /**
   * Stop forwarding one of its sources (needs `canModerate`). The relay stops it and tells it
   * and everyone else (`track-unpublished`).
   */
  forceUnpublish(source: Source): Promise<void> {
    return this.actions.forceUnpublish(this.id, source);
  }

  /**
   * Ask this participant to stop publishing a source (needs `canModerate`). It gets
   * `unpublish-requested` and decides.
   */
  requestUnpublish(source: Source): Promise<void> {
    return this.actions.requestUnpublish(this.id, source);
  }
}
