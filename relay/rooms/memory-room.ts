import type { ParticipantCounts, ParticipantInfo, ServerFrame, Tier } from '../../src/protocol/messages.ts';
import { StreamBoard } from '../data/streams.ts';
import { TopicBoard } from '../data/topics.ts';
import { MediaBoard } from '../media/board.ts';
import { OutputBoard } from '../outputs/board.ts';
import { CountCoalescer } from './count-coalescer.ts';
import { Lobby } from './lobby.ts';
import { Timeline } from './timeline.ts';
import { MemberList, type ListNode } from './member-list.ts';
import type { Member, Room, RoomRegistry, RoomServices, TierCursor, TierPage } from './types.ts';

interface Entry {
  member: Member;
  node: ListNode<Member>;
}

interface NodeCursor extends TierCursor {
  readonly node: ListNode<Member>;
}


/** A room held in this process's memory. Joins and leaves are O(1) whatever the audience size. */
export class MemoryRoom implements Room {
  private readonly entries = new Map<string, Entry>();
  private readonly tiers: Record<Tier, MemberList<Member>> = { speaker: new MemberList(), viewer: new MemberList() };
  private readonly coalescer: CountCoalescer;
  private disposed = false;
  private readonly moderators = new Set<Member>();
  readonly topics: TopicBoard;
  readonly streams: StreamBoard;
  readonly lobby: Lobby;
  readonly outputs: OutputBoard;
  readonly timeline = new Timeline();
  readonly media: MediaBoard;

  constructor(
    readonly id: string,
    { limits, providers, log, media }: RoomServices,
  ) {
    this.media = new MediaBoard(media, { broadcast: (frame, exceptId) => this.broadcast(frame, exceptId), log });
    this.coalescer = new CountCoalescer(limits.countIntervalMs, () => this.counts(), (counts) =>
      this.broadcast({ type: 'event', name: 'participant-count-changed', data: counts }),
    );
    const lookup = (participantId: string) => this.get(participantId);
    this.topics = new TopicBoard(limits, lookup, this.timeline);
    this.streams = new StreamBoard(limits, () => this.members(), lookup, this.timeline);
    this.lobby = new Lobby((frame) => this.toModerators(frame));
    this.outputs = new OutputBoard(
      { roomId: id, timeline: this.timeline, log, broadcast: (frame) => this.broadcast(frame), tapMedia: (tap) => this.media.tap(tap) },
      providers,
    );
  }

  get size(): number {
    return this.entries.size;
  }

  get(participantId: string): Member | undefined {
    return this.entries.get(participantId)?.member;
  }

  private info(m: Member): ParticipantInfo {
    const tracks = this.media.tracksOf(m);
    return tracks.length ? { id: m.id, name: m.name, joinedAt: m.joinedAt, tracks } : { id: m.id, name: m.name, joinedAt: m.joinedAt };
  }

  *members(): IterableIterator<Member> {
    for (const entry of this.entries.values()) yield entry.member;
  }

  add(member: Member): void {
    const node = this.tiers[member.tier].append(member);
    this.entries.set(member.id, { member, node });
    if (member.grant.canModerate) this.moderators.add(member);
    this.timeline.emit({ type: 'participant-joined', participantId: member.id, name: member.name, tier: member.tier });
    if (member.tier === 'speaker') this.broadcast({ type: 'event', name: 'participant-joined', data: this.info(member) }, member.id);
    this.coalescer.changed();
  }

  remove(member: Member): boolean {
    const entry = this.entries.get(member.id);
    if (!entry || entry.member !== member) return false;
    this.entries.delete(member.id);
    this.tiers[member.tier].remove(entry.node);
    this.moderators.delete(member);
    this.media.memberLeft(member);
    this.topics.drop(member);
    this.streams.memberLeft(member);
    this.timeline.emit({ type: 'participant-left', participantId: member.id, tier: member.tier });
    if (member.tier === 'speaker') this.broadcast({ type: 'event', name: 'participant-left', data: { id: member.id } });
    this.coalescer.changed();
    return true;
  }

  counts(): ParticipantCounts {
    const speaker = this.tiers.speaker.size;
    const viewer = this.tiers.viewer.size;
    return { speaker, viewer, total: speaker + viewer };
  }

  stage(exceptId?: string): ParticipantInfo[] {
    const out: ParticipantInfo[] = [];
    for (const m of this.tiers.speaker) if (m.id !== exceptId) out.push(this.info(m));
    return out;
  }

  page(tier: Tier, after: TierCursor | null, limit: number): TierPage {
    const { values, last } = this.tiers[tier].page(after ? (after as NodeCursor).node : null, limit);
    const next: NodeCursor | null = last ? { tier, node: last } : null;
    return { participants: values.map((m) => ({ id: m.id, name: m.name, joinedAt: m.joinedAt, tier: m.tier })), next };
  }

  broadcast(frame: ServerFrame, exceptId?: string): void {
    if (this.disposed) return;
    const data = Buffer.from(JSON.stringify(frame));
    for (const { member } of this.entries.values()) if (member.id !== exceptId) member.link.sendRaw(data);
  }

  toModerators(frame: ServerFrame): void {
    if (this.disposed || this.moderators.size === 0) return;
    const data = Buffer.from(JSON.stringify(frame));
    for (const member of this.moderators) member.link.sendRaw(data);
  }

  dispose(): void {
    this.disposed = true;
    this.coalescer.dispose();
    this.streams.dispose();
    this.media.dispose();
    void this.outputs.dispose();
  }
}

/** Rooms held in memory, created on first join. */
export class MemoryRoomRegistry implements RoomRegistry {
  private readonly rooms = new Map<string, MemoryRoom>();

  constructor(private readonly services: RoomServices) {}

  get size(): number {
    return this.rooms.size;
  }

  get(roomId: string): Room | undefined {
    return this.rooms.get(roomId);
  }

  getOrCreate(roomId: string): Room {
    let room = this.rooms.get(roomId);
    if (!room) {
      room = new MemoryRoom(roomId, this.services);
      this.rooms.set(roomId, room);
    }
    return room;
  }

  delete(roomId: string): void {
    this.rooms.get(roomId)?.dispose();
    this.rooms.delete(roomId);
  }

  [Symbol.iterator](): IterableIterator<Room> {
    return this.rooms.values();
  }
}
