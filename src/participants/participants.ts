import { SdkError } from '../errors.ts';
import type { Emitter } from '../emitter.ts';
import type { ParticipantCounts, ParticipantInfo, ParticipantSummary, Tier } from '../protocol/messages.ts';
import type { Connection } from '../connection.ts';
import type { RoomEvents } from '../room-events.ts';
import { RemoteParticipant, type RemoteActions } from './remote-participant.ts';
import { deleteEntry, ReadOnlyMap, writeEntry } from './read-only-map.ts';

/** Options of {@link Room.getParticipants}. */
export interface GetParticipantsOptions {
  /** Which tier to walk. */
  tier: Tier;
  /** Page size, 1 to 1000 (default 100). */
  limit?: number;
  /** `nextCursor` of the previous page; omit for the first page. */
  cursor?: string | null;
}

/** One page of participants, in join order. */
export interface ParticipantPage {
  participants: ParticipantSummary[];
  /** Pass it as `cursor` for the next page; `null` when the walk is complete. */
  nextCursor: string | null;
}

/** What else happens when a participant appears or goes (its media). */
export interface ParticipantHooks {
  appeared(participant: RemoteParticipant, info: ParticipantInfo): void;
  /** Still there after a reconnection: `info` is the relay's view now. */
  synced(participant: RemoteParticipant, info: ParticipantInfo): void;
  gone(participant: RemoteParticipant): void;
}

/**
 * The roster (on-stage participants only) and the room's counts. Audience members are only
 * counted, and pulled page by page on request.
 */
export class Participants {
  /** The on-stage participants: a Map callers can read and not change. */
  readonly view = new ReadOnlyMap<string, RemoteParticipant>();
  private current: ParticipantCounts;

  constructor(
    private readonly connection: Connection,
    private readonly events: Emitter<RoomEvents>,
    private readonly actions: RemoteActions,
    private readonly hooks: ParticipantHooks,
    initial: ParticipantInfo[],
    counts: ParticipantCounts,
    /** The local participant: never one of the others, whatever a relay says. */
    private readonly selfId: string,
  ) {
    for (const info of initial) writeEntry(this.view, info.id, new RemoteParticipant(info, actions));
    this.current = Object.freeze({ ...counts });
  }

  get counts(): ParticipantCounts {
    return this.current;
  }

  /** Payloads to replay to a late `participant-joined` listener, in join order. */
  *joinedReplay(): Iterable<RoomEvents['participant-joined']> {
    for (const participant of this.view.values()) yield { participant };
  }

  joined(info: ParticipantInfo): void {
    if (info.id === this.selfId || this.view.has(info.id)) return;
    const participant = new RemoteParticipant(info, this.actions);
    writeEntry(this.view, info.id, participant);
    this.events.emit('participant-joined', { participant });
    this.hooks.appeared(participant, info);
  }

  /** @internal The initial stage's media, once the room is wired. */
  start(initial: ParticipantInfo[]): void {
    for (const info of initial) {
      const participant = this.view.get(info.id);
      if (participant) this.hooks.appeared(participant, info);
    }
  }

  left(id: string): void {
    const participant = this.view.get(id);
    if (!participant) return;
    this.hooks.gone(participant);
    deleteEntry(this.view, id);
    this.events.emit('participant-left', { participant });
  }

  /** After a reconnection: the relay's stage now; who came and went meanwhile is told, once. */
  reconcile(infos: ParticipantInfo[], counts: ParticipantCounts): void {
    const now = new Set(infos.map((i) => i.id));
    for (const id of [...this.view.keys()]) if (!now.has(id)) this.left(id);
    for (const info of infos) {
      const participant = this.view.get(info.id);
      if (participant) this.hooks.synced(participant, info);
      else this.joined(info);
    }
    this.countChanged(counts);
  }

  countChanged(counts: ParticipantCounts): void {
    const c = this.current;
    if (c.speaker === counts.speaker && c.viewer === counts.viewer && c.total === counts.total) return;
    this.current = Object.freeze({ speaker: counts.speaker, viewer: counts.viewer, total: counts.total });
    this.events.emit('participant-count-changed', this.current);
  }

  async page(options: GetParticipantsOptions): Promise<ParticipantPage> {
    if (typeof options !== 'object' || options === null) {
      throw new SdkError('INVALID_ARGUMENT', "getParticipants needs an options object such as { tier: 'viewer' }");
    }
    const params = {
      tier: options.tier,
      ...(options.limit === undefined ? {} : { limit: options.limit }),
      ...(options.cursor === undefined || options.cursor === null ? {} : { cursor: options.cursor }),
    };
    return this.connection.request('participants.list', params);
  }
}
