import type { Connection } from '../connection.ts';
import type { Source } from '../protocol/grant.ts';

/**
 * Moderation calls. Each needs `canModerate` in the token's grant; the SDK sends every call
 * and the relay answers `INVALID_PERMISSIONS` when the grant lacks it.
 */
export class Moderation {
  constructor(private readonly connection: Connection) {}

  /** Remove a participant, on stage or in the audience, by id. */
  async remove(participantId: string): Promise<void> {
    await this.connection.request('participant.remove', { participantId });
  }

  /** Ask a participant to stop publishing a source; it decides. */
  async requestUnpublish(participantId: string, source: Source): Promise<void> {
    await this.connection.request('participant.request-unpublish', { participantId, source });
  }

  /** Stop forwarding a participant's source; the relay tells it and everyone else. */
  async forceUnpublish(participantId: string, source: Source): Promise<void> {
    await this.connection.request('media.force-unpublish', { participantId, source });
  }

  /** End the room for everyone. */
  async end(): Promise<void> {
    await this.connection.request('room.end', {});
  }
}
