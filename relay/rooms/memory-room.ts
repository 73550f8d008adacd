import type { ParticipantCounts, ParticipantInfo, ServerFrame, Tier } from '../../src/protocol/messages.ts';
import { StreamBoard } from '../data/streams.ts';
import { TopicBoard } from '../data/topics.ts';
import { MediaBoard } from '../media/board.ts';
import { OutputBoard } from '../outputs/board.ts';
import { CountCoalescer } from './count-coalescer.ts';
import { Lobby } from './lobby.ts';
import { Timeline } from './timeline.ts';
import { Budget } from '../budget.ts';
import { MemberList } from './member-list.ts';
import { presenceKey, type PresenceBudgets } from './presence.ts';
import type { Member, Opener, Room, RoomObserver, RoomRegistry, RoomServices, TierCursor, TierPage } from './types.ts';

/** Rooms of more members than this hold their arrivals, departures and counts for company (at most `HOLD_MS`, 50 ms). */
export const HOLD_ROOM_SIZE = 64;

interface Entry {
  member: Member;
  /** Its join sequence number in its tier's list. */
  seq: number;
  /** Bytes of the event that announced its arrival to each member (0 for a viewer: never announced). */
  announced: number;
}

/** What a reserved identity costs besides its characters (a Map entry and a string: 520 bytes measured for 128 characters). */
export const RESERVATION_BYTES = 400;

/** A room held in this process's memory. Joins and leaves are O(1) whatever the audience size. */
export class MemoryRoom implements Room {
  private readonly entries = new Map<string, Entry>();
  private readonly tiers: Record<Tier, MemberList<Member>> = { speaker: new MemberList(), viewer: new MemberList() };
  private readonly coalescer: CountCoalescer;
  private disposed = false;
  private readonly moderators = new Set<Member>();
  /**
   * Ids pinned tokens have used, reserved for the room's lifetime within a byte budget (room and
   * relay): past it the oldest of those gone make way. Kept in the order last seen: an id still
   * present that reaches the front moves back. Without a bound, a room kept open by one member
   * held every pinned id that ever joined (520 bytes each at 128 characters, for ever).
   */
  private readonly pinnedIds = new Map<string, number>();
  private readonly reservations: Budget;
  readonly topics: TopicBoard;
  readonly streams: StreamBoard;
  readonly lobby: Lobby;
  readonly outputs: OutputBoard;
  readonly timeline = new Timeline();
  readonly media: MediaBoard;
  readonly createdAt = Date.now();
  private readonly observer: RoomObserver | undefined;
  private readonly presence: PresenceBudgets;

  constructor(
    readonly project: string,
    readonly id: string,
    readonly opener: Opener,
    { limits, providers, log, media, budgets, observer }: RoomServices,
  ) {
    this.observer = observer;
    this.presence = budgets.presence;
    this.reservations = new Budget(limits.reservedIdsBytesPerRoom, budgets.reservedIdsOf(project));
    this.media = new MediaBoard(media, { broadcast: (frame, exceptId) => this.broadcast(frame, exceptId), log });
    this.coalescer = new CountCoalescer(limits.countIntervalMs, () => this.counts(), (counts) =>
      this.broadcast({ type: 'event', name: 'participant-count-changed', data: counts }, undefined, false, this.crowded),
    );
    const lookup = (participantId: string) => this.get(participantId);
    this.topics = new TopicBoard(
      limits,
      {
        // a leaked domain-wide token fills its own project's part of the relay's pools, not everyone's
        history: new Budget(limits.historyBytesPerRoom, opener === 'domain' ? budgets.domain(project).history : budgets.history),
        store: budgets.arena,
        subscriptions: budgets.subscriptions,
        domainSubscriptions: budgets.domain(project).subscriptions,
      },
      lookup,
      (participantId) => this.pinnedIds.has(participantId),
      this.timeline,
      // written down only where someone keeps it (a cluster's room record): a single relay copies nothing
      observer?.wantsHistory ? { kept: (m) => this.observer?.historyKept?.(this, m), forgot: (seq) => this.observer?.historyForgotten?.(this, seq) } : null,
    );
    this.streams = new StreamBoard(limits, () => this.members(), lookup, this.timeline, (m) => (m.domainWide ? budgets.domain(m.project).streamRecipients : budgets.streamRecipients));
    this.lobby = new Lobby((frame) => this.toModerators(frame), (request) => this.observer?.lobbyRequest(this, request));
    this.outputs = new OutputBoard(
      { project, roomId: id, timeline: this.timeline, log, nameOf: (participantId) => this.get(participantId)?.name ?? participantId, broadcast: (frame, optional) => this.broadcast(frame, undefined, optional), broadcastLazy: (frame) => this.broadcast(frame, undefined, false, this.crowded), broadcastRaw: (data, optional) => this.broadcastRaw(data, optional), broadcastSplit: (full, reduced, sees) => this.broadcastSplit(full, reduced, sees), tapMedia: (tap) => this.media.tap(tap), changed: (change) => this.observer?.outputChanged(this, change) },
      providers,
      { startTimeoutMs: limits.outputStartTimeoutMs, starts: budgets.outputStarts },
    );
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Whether its arrivals, departures and counts are held for company (see `MemberLink.sendRaw`):
   * in a room this large each of them written on its own is that many more syscalls, the
   * relay's largest cost; in a smaller one they go out at once.
   */
  private get crowded(): boolean {
    return this.entries.size > HOLD_ROOM_SIZE;
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

  pinnedIdentity(participantId: string): boolean {
    return this.pinnedIds.has(participantId);
  }

  pinnedIdentities(): IterableIterator<string> {
    return this.pinnedIds.keys();
  }

  reserveIdentity(participantId: string): void {
    if (this.disposed) return;
    const held = this.pinnedIds.get(participantId);
    if (held !== undefined) {
      // seen again: last to make way
      this.pinnedIds.delete(participantId);
      this.pinnedIds.set(participantId, held);
      return;
    }
    const cost = RESERVATION_BYTES + participantId.length;
    // each id looked at is either given up or moved back: a pass makes way in time linear in what it frees
    let looks = this.pinnedIds.size;
    while (!this.reservations.take(cost)) {
      const oldest = this.pinnedIds.entries().next().value;
      // every reserved identity is present: this one is kept while it is (its seat holds it)
      if (!oldest || looks-- <= 0) return;
      const [id, bytes] = oldest;
      this.pinnedIds.delete(id);
      if (this.entries.has(id)) this.pinnedIds.set(id, bytes);
      else {
        this.reservations.give(bytes);
        this.observer?.identityReleased?.(this, id);
      }
    }
    this.pinnedIds.set(participantId, cost);
  }

  add(member: Member, position?: number, announce = true): void {
    // a member under the id would stay in its tier's list, reachable by no id
    if (this.entries.has(member.id)) throw new Error(`room ${this.id}: "${member.id}" is in the room already`);
    if (member.pinned) this.reserveIdentity(member.id);
    this.topics.arrived(member);
    this.streams.arrived(member);
    const seq = this.tiers[member.tier].append(member, position);
    const entry: Entry = { member, seq, announced: 0 };
    this.entries.set(member.id, entry);
    if (member.grant.canModerate) this.moderators.add(member);
    this.timeline.emit({ type: 'participant-joined', participantId: member.id, name: member.name, tier: member.tier });
    if (member.tier === 'speaker' && announce) {
      const data = Buffer.from(JSON.stringify({ type: 'event', name: 'participant-joined', data: this.info(member) } satisfies ServerFrame));
      entry.announced = data.length;
      this.broadcastRaw(data, false, member.id, this.crowded);
    }
    this.coalescer.changed();
    if (!this.disposed) this.observer?.participantJoined(this, member);
  }

  position(participantId: string): number | undefined {
    return this.entries.get(participantId)?.seq;
  }

  remove(member: Member): boolean {
    const entry = this.entries.get(member.id);
    if (!entry || entry.member !== member) return false;
    this.entries.delete(member.id);
    this.tiers[member.tier].remove(entry.seq);
    this.moderators.delete(member);
    this.media.memberLeft(member);
    this.topics.drop(member);
    this.streams.memberLeft(member);
    this.timeline.emit({ type: 'participant-left', participantId: member.id, tier: member.tier });
    if (member.tier === 'speaker') {
      const data = Buffer.from(JSON.stringify({ type: 'event', name: 'participant-left', data: { id: member.id } } satisfies ServerFrame));
      this.broadcastRaw(data, false, undefined, this.crowded);
      // a departure pays for itself and for its arrival, as many bytes as they were: a room that
      // fills up costs its tokens nothing, a token that keeps coming and going pays for every
      // round (nothing is sent from an ended room)
      if (!this.disposed) this.presence.charge(presenceKey(member), [entry.announced, data.length], this.size);
    }
    this.coalescer.changed();
    if (!this.disposed) this.observer?.participantLeft(this, member);
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
    const { values, last } = this.tiers[tier].page(after ? after.position : null, limit);
    const next: TierCursor | null = last === null ? null : { tier, position: last };
    return { participants: values.map((m) => ({ id: m.id, name: m.name, joinedAt: m.joinedAt, tier: m.tier })), next };
  }

  /** `lazy`: an arrival, a departure or a count, which may wait a moment to share a write (see `MemberLink.sendRaw`). */
  broadcast(frame: ServerFrame, exceptId?: string, optional = false, lazy = false): void {
    this.broadcastRaw(Buffer.from(JSON.stringify(frame)), optional, exceptId, lazy);
  }

  /** Send bytes already serialised to every member (optionally but one). */
  broadcastRaw(data: Buffer, optional = false, exceptId?: string, lazy = false): void {
    if (this.disposed) return;
    for (const { member } of this.entries.values()) if (member.id !== exceptId) member.link.sendRaw(data, optional, lazy);
  }

  broadcastSplit(full: ServerFrame, reduced: ServerFrame | null, sees: (member: Member) => boolean): void {
    if (this.disposed) return;
    let fullData: Buffer | null = null;
    let reducedData: Buffer | null = null;
    for (const { member } of this.entries.values()) {
      if (sees(member)) member.link.sendRaw((fullData ??= Buffer.from(JSON.stringify(full))));
      else if (reduced) member.link.sendRaw((reducedData ??= Buffer.from(JSON.stringify(reduced))));
    }
  }

  toModerators(frame: ServerFrame): void {
    if (this.disposed || this.moderators.size === 0) return;
    const data = Buffer.from(JSON.stringify(frame));
    for (const member of this.moderators) member.link.sendRaw(data);
  }

  get ended(): boolean {
    return this.disposed;
  }

  dispose(): void {
    this.disposed = true;
    this.reservations.give(this.reservations.inUse);
    this.pinnedIds.clear();
    this.coalescer.dispose();
    this.topics.dispose();
    this.streams.dispose();
    this.media.dispose();
    void this.outputs.dispose();
  }
}

/** Rooms held in memory, created on first join, keyed by project and room id. */
export class MemoryRoomRegistry implements RoomRegistry {
  private readonly rooms = new Map<string, MemoryRoom>();
  private readonly byProject = new Map<string, Set<MemoryRoom>>();
  private readonly domainOpened = new Map<string, number>();
  private domainTotal = 0;
  /** Rooms that stay open however empty while a member is taken over (see {@link keep}). */
  private readonly kept = new Set<Room>();

  constructor(private readonly services: RoomServices) {}

  private static key(project: string, roomId: string): string {
    return `${project}\u0000${roomId}`;
  }

  get size(): number {
    return this.rooms.size;
  }

  openedByDomain(project?: string): number {
    return project === undefined ? this.domainTotal : (this.domainOpened.get(project) ?? 0);
  }

  countIn(project: string): number {
    return this.byProject.get(project)?.size ?? 0;
  }

  get(project: string, roomId: string): Room | undefined {
    return this.rooms.get(MemoryRoomRegistry.key(project, roomId));
  }

  getOrCreate(project: string, roomId: string, opener: Opener): Room {
    const key = MemoryRoomRegistry.key(project, roomId);
    let room = this.rooms.get(key);
    if (!room) {
      room = new MemoryRoom(project, roomId, opener, this.services);
      this.rooms.set(key, room);
      let mine = this.byProject.get(project);
      if (!mine) this.byProject.set(project, (mine = new Set()));
      mine.add(room);
      this.services.observer?.roomStarted(room);
      if (opener === 'domain') {
        this.domainOpened.set(project, this.openedByDomain(project) + 1);
        this.domainTotal++;
      }
    }
    return room;
  }

  delete(room: Room): void {
    const key = MemoryRoomRegistry.key(room.project, room.id);
    const held = this.rooms.get(key);
    if (held !== room) return;
    this.rooms.delete(key);
    const mine = this.byProject.get(room.project);
    mine?.delete(held);
    if (mine?.size === 0) this.byProject.delete(room.project);
    if (held.opener === 'domain') {
      this.domainTotal--;
      const n = this.openedByDomain(room.project) - 1;
      if (n > 0) this.domainOpened.set(room.project, n);
      else this.domainOpened.delete(room.project);
    }
    held.dispose();
    this.services.observer?.roomFinished(held);
  }

  release(room: Room): void {
    if (room.size === 0 && room.lobby.size === 0 && !this.kept.has(room)) this.delete(room);
  }

  keep<T>(room: Room, fn: () => T): T {
    this.kept.add(room);
    try {
      return fn();
    } finally {
      this.kept.delete(room);
    }
  }

  inProject(project: string): IterableIterator<Room> {
    return (this.byProject.get(project) ?? new Set<MemoryRoom>()).values();
  }

  [Symbol.iterator](): IterableIterator<Room> {
    return this.rooms.values();
  }
}
