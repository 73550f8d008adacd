import type { EffectiveGrant } from '../protocol/grant.ts';
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
  constructor(self: SelfInfo) {
    this.id = self.id;
    this.name = self.name;
    this.isViewer = self.isViewer;
    this.grant = Object.freeze({ ...self.grant, canPublishSources: [...self.grant.canPublishSources] });
    this.joinedAt = self.joinedAt;
  }
}
