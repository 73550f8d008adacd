import type { PubSubMessage } from '../../src/protocol/messages.ts';
import type { Budget } from '../budget.ts';
import { eventFrameOfJson, messageJsonParts, objectOfArray, payloadJson as jsonOf, type Payload } from './raw-json.ts';
import type { ArenaBytes, ByteArena, KeptBytes } from './byte-arena.ts';
import { RelayError } from '../errors.ts';
import type { Timeline } from '../rooms/timeline.ts';
import type { Member } from '../rooms/member.ts';

/** A persisted message's target, beside its id's characters: the string's header and its entry in the message's set. */
const TARGET_BYTES = 56;

/** Limits of a room's topics. */
export interface TopicLimits {
  /** Persisted messages kept per topic. */
  historySize: number;
  /** Topics with history in one room. */
  maxTopicsPerRoom: number;
  /** Topics one member may subscribe to. */
  maxSubscriptions: number;
}

/**
 * What the topics of a room charge: its history bytes (nested in the relay's, or in its project's
 * part when a domain-wide token opened the room) and subscriptions, the relay's or, for a member
 * of a domain-wide token, its project's part of them.
 */
export interface TopicBudgets {
  history: Budget;
  /** Where kept messages' bytes live (the relay's, shared by its rooms). */
  store: ByteArena;
  subscriptions: Budget;
  domainSubscriptions: Budget;
}

/** A kept message as it is written down elsewhere (a cluster's room record), and read back. */
export interface KeptMessage {
  /** Its place in the room's order of kept messages. */
  seq: number;
  topic: string;
  /** The message's JSON, as it is kept and answered. */
  json: string;
  from: string;
  to?: string[];
  /** The size of the frame it was fanned out in (what keeping it costs). */
  frameBytes: number;
}

/** Told of each message kept and forgotten (a cluster keeps a room's history in Redis for its next home). */
export interface HistoryJournal {
  kept(message: KeptMessage): void;
  forgot(seq: number): void;
}

/**
 * A kept message, as bytes: the serialised message (a copy of its part of the frame that was
 * fanned out, in the relay's arena: see `byte-arena.ts`), never the parsed payload, whose object
 * graph can be twenty times its JSON.
 */
interface Stored {
  seq: number;
  json: ArenaBytes;
  from: string;
  /** Targets of a targeted message; only they (and the sender) ever see it. Dropped when it is forgotten. */
  to?: ReadonlySet<string> | undefined;
  /** What keeping it costs: its frame and its target list. */
  bytes: number;
  /** The size of the frame it was fanned out in. */
  frameBytes: number;
  topic: string;
  gone: boolean;
}



/** Who publishes: a member, or the server API acting for its project. */
export type Sender = Pick<Member, 'id' | 'fanout'>;

interface Topic {
  subscribers: Set<Member>;
  history: Stored[];
}

/**
 * The pubsub state of one room: who subscribes to what, and each topic's history. History is a
 * byte budget of the room (and of the relay): a persisted message that does not fit pushes out
 * the room's oldest, whatever their topic. Only topics with history count against the room's
 * topic quota, so subscribing (which any member with `canSubscribeData` may do) never uses it
 * up; subscriptions have their own per-member and relay-wide counts. A message is serialised
 * once and the same bytes go to every recipient, as optional traffic (a member not keeping up
 * misses it rather than being cut).
 */
/** `{"messages":[]}` around a history answer's messages (each adds its length and a comma). */
const HISTORY_WRAPPER_BYTES = 14;

export class TopicBoard {
  private readonly topics = new Map<string, Topic>();
  private readonly byMember = new Map<Member, Set<string>>();
  /** Every kept message of the room, oldest first (with tombstones up to `head`). */
  private order: Stored[] = [];
  private head = 0;
  /** Forgotten messages still in `order` at or after `head` (a topic's own cap forgets them there). */
  private goneAhead = 0;
  private topicsWithHistory = 0;
  private seq = 0;
  private keptSeq = 0;
  /**
   * The last kept message when each member arrived. An unpinned id is anyone's once its holder
   * has left: a targeted message kept before its sender's id was taken again is not the new
   * holder's own (a shared audience token read a departed viewer's messages to the host).
   */
  private readonly arrivedAfter = new WeakMap<Member, number>();
  private disposed = false;

  constructor(
    private readonly limits: TopicLimits,
    private readonly budgets: TopicBudgets,
    private readonly lookup: (participantId: string) => Member | undefined,
    /** True for an id a pinned token used in this room: what is targeted to it is not an unpinned member's. */
    private readonly reserved: (participantId: string) => boolean,
    private readonly timeline: Timeline,
    private readonly journal: HistoryJournal | null = null,
  ) {}

  /** Bytes of history the room keeps now. */
  get historyBytes(): number {
    return this.budgets.history.inUse;
  }

  subscribe(member: Member, name: string): void {
    this.live();
    const mine = this.byMember.get(member) ?? new Set<string>();
    if (mine.has(name)) return;
    if (mine.size >= this.limits.maxSubscriptions) {
      throw new RelayError('RATE_LIMITED', `at most ${this.limits.maxSubscriptions} subscriptions per participant`, 'too-many-subscriptions');
    }
    if (!this.pool(member).take(1)) throw new RelayError('RATE_LIMITED', 'the relay holds all the subscriptions it can: try again later', 'subscriptions-full');
    let topic = this.topics.get(name);
    if (!topic) {
      topic = { subscribers: new Set(), history: [] };
      this.topics.set(name, topic);
    }
    topic.subscribers.add(member);
    mine.add(name);
    this.byMember.set(member, mine);
  }

  unsubscribe(member: Member, name: string): void {
    const mine = this.byMember.get(member);
    if (!mine?.delete(name)) return;
    if (mine.size === 0) this.byMember.delete(member);
    this.pool(member).give(1);
    const topic = this.topics.get(name);
    topic?.subscribers.delete(member);
    if (topic) this.forgetIfEmpty(name, topic);
  }

  /** Forget every subscription of a member that left. */
  drop(member: Member): void {
    for (const name of [...(this.byMember.get(member) ?? [])]) this.unsubscribe(member, name);
  }

  /**
   * Deliver a message to the topic's subscribers (or those of them in `to`), never back to its
   * sender, and keep it when `persist`. Returns the message and how many received it. Either
   * all of it happens or, refused, none of it.
   */
  publish(
    from: Sender,
    name: string,
    payload: Payload,
    options: { to?: readonly string[]; persist?: boolean },
    /** `payload` as JSON, when the caller has it already (it was measured): not encoded twice. */
    payloadJson: string | Uint8Array = jsonOf(payload),
  ): { message: Omit<PubSubMessage, 'payload'>; recipients: number } {
    this.live();
    if (!from.fanout.hasCredit()) throw new RelayError('RATE_LIMITED', 'what you sent recently is still being delivered to many members: slow down', 'fanout-rate');
    const message = { id: `m${(++this.seq).toString(36)}`, topic: name, from: from.id, timestamp: Date.now() };
    const { frame: data, json } = eventFrameOfJson('pubsub.message', messageJsonParts(message, payloadJson));
    const to = options.to ? new Set(options.to) : undefined;
    if (options.persist && this.limits.historySize > 0) {
      const stored = this.keep(name, json, from.id, to, data.length, ++this.keptSeq);
      this.journal?.kept({ seq: stored.seq, topic: name, json: json.toString(), from: from.id, ...(to ? { to: [...to] } : {}), frameBytes: data.length });
    }
    // targeted messages are private: outputs (recordings, captions) only see public ones
    // a payload that came as its bytes goes as them: parsed here, objects with keys of their own
    // cost each publish 5–12 ms while a recording ran
    if (!to && this.timeline.listening) this.timeline.emit({ type: 'message', topic: name, from: from.id, payload, id: message.id });
    const topic = this.topics.get(name);
    if (!topic) return { message, recipients: 0 };
    let recipients = 0;
    if (to) {
      // cost of a targeted message: its targets, not the topic's audience
      for (const id of to) {
        const member = this.lookup(id);
        if (member && member !== from && topic.subscribers.has(member)) {
          member.link.sendRaw(data, true);
          recipients++;
        }
      }
    } else {
      for (const member of topic.subscribers) {
        if (member !== from) {
          member.link.sendRaw(data, true);
          recipients++;
        }
      }
    }
    // the sender pays for every copy the relay sent, after the fact: a debt it works off
    from.fanout.spend(data.length, recipients);
    return { message, recipients };
  }

  /**
   * Keep again what another node kept (the room's last home), oldest first, within this room's
   * budgets and limits as if it were published now; message ids go on after the last one kept.
   */
  restore(messages: readonly KeptMessage[]): void {
    if (this.disposed) return;
    for (const m of [...messages].sort((a, b) => a.seq - b.seq)) {
      try {
        this.keep(m.topic, Buffer.from(m.json), m.from, m.to ? new Set(m.to) : undefined, m.frameBytes, m.seq);
      } catch {
        continue; // over this relay's budgets: the oldest are the ones not kept
      }
      this.keptSeq = Math.max(this.keptSeq, m.seq);
      const id = /^\{"id":"m([0-9a-z]+)"/.exec(m.json)?.[1];
      if (id) this.seq = Math.max(this.seq, parseInt(id, 36));
    }
  }

  private keep(name: string, json: Buffer, from: string, to: ReadonlySet<string> | undefined, frameBytes: number, seq: number): Stored {
    // (a record from elsewhere is charged at least its JSON: what the arena will hold)
    let bytes = Math.max(frameBytes, json.length) + 64;
    // what a target costs the heap: its string (two bytes a character past Latin-1) and its entry
    // in the set; charged at its length, ids of non-Latin characters held twice their charge
    if (to) for (const id of to) bytes += TARGET_BYTES + 2 * id.length;
    const budget = this.budgets.history;
    if (bytes > budget.limit) throw new RelayError('PAYLOAD_TOO_LARGE', `a persisted message may take at most ${budget.limit} bytes of this room's history`, 'history-budget');
    let topic = this.topics.get(name);
    if (!topic?.history.length && this.topicsWithHistory >= this.limits.maxTopicsPerRoom) {
      throw new RelayError('RATE_LIMITED', `this room already keeps history for ${this.limits.maxTopicsPerRoom} topics`, 'too-many-topics');
    }
    // the room's oldest make way, whatever their topic, until it fits here and relay-wide
    while (!budget.fits(bytes) && this.evictOldest());
    if (!budget.take(bytes)) throw new RelayError('RATE_LIMITED', 'the relay keeps all the history it can: try again later, or publish without persist', 'history-full');
    topic = this.topics.get(name); // eviction may have emptied and dropped it
    if (!topic) {
      topic = { subscribers: new Set(), history: [] };
      this.topics.set(name, topic);
    }
    if (topic.history.length === 0) this.topicsWithHistory++;
    // in the arena (not a view of the frame fanned out), given back when it is forgotten
    const stored: Stored = { seq, json: this.budgets.store.keep(json), from, bytes, frameBytes, topic: name, gone: false, ...(to ? { to } : {}) };
    topic.history.push(stored);
    this.order.push(stored);
    if (topic.history.length > this.limits.historySize) {
      this.forget(topic.history[0]!);
      this.compact();
    }
    return stored;
  }

  /** Every message kept now, oldest first, as a journal writes them (to write a room's record whole again). */
  kept(): KeptMessage[] {
    return this.order.slice(this.head).filter((s) => !s.gone).map((s) => ({ seq: s.seq, topic: s.topic, json: s.json.toString(), from: s.from, ...(s.to ? { to: [...s.to] } : {}), frameBytes: s.frameBytes }));
  }

  /** Drop the room's oldest kept message; false when there is none. */
  private evictOldest(): boolean {
    while (this.head < this.order.length) {
      const stored = this.order[this.head++]!;
      if (stored.gone) {
        this.goneAhead--;
        continue;
      }
      this.forget(stored);
      this.goneAhead--; // behind the head now
      this.compact();
      return true;
    }
    this.compact();
    return false;
  }

  private forget(stored: Stored): void {
    if (stored.gone) return;
    stored.gone = true;
    this.goneAhead++;
    // its entry may stay in `order` a while: nothing of it but the entry
    stored.to = undefined;
    this.journal?.forgot(stored.seq);
    this.budgets.history.give(stored.bytes);
    stored.json.free();
    const topic = this.topics.get(stored.topic)!;
    const at = topic.history.indexOf(stored);
    topic.history.splice(at, 1);
    if (topic.history.length === 0) {
      this.topicsWithHistory--;
      this.forgetIfEmpty(stored.topic, topic);
    }
  }

  /**
   * Drop the entries of forgotten messages from `order` once they are most of it: those behind
   * the head (evicted oldest first) and those a topic's own cap forgot (a member persisting to one
   * topic over and over, the room's byte budget never full, left one entry a message for ever).
   */
  private compact(): void {
    const waste = this.head + this.goneAhead;
    if (waste > 1024 && waste > this.order.length / 2) {
      this.order = this.order.slice(this.head).filter((s) => !s.gone);
      this.head = 0;
      this.goneAhead = 0;
    }
  }

  private forgetIfEmpty(name: string, topic: Topic): void {
    if (topic.subscribers.size === 0 && topic.history.length === 0) this.topics.delete(name);
  }

  /**
   * The last `limit` persisted messages `reader` may see, oldest first, as the JSON of a
   * `pubsub.history` result: `{"messages":[...]}` spliced from the kept bytes, never re-encoded.
   * The newest that fit in `maxBytes` (the reader's byte burst: a larger answer could never be
   * paid for); `pay` is charged the answer's size before it is built, so a refused request
   * costs a walk over the lengths, not a copy of megabytes.
   */
  history(reader: Member, name: string, limit: number, maxBytes: number, pay: (bytes: number) => void): Buffer {
    const stored = this.topics.get(name)?.history ?? [];
    const mayReadTargeted = reader.pinned || !this.reserved(reader.id);
    // what the reader's id sent: all of it for a pinned identity (the id is its token's), else what it sent since it arrived
    const ownSince = reader.pinned ? 0 : (this.arrivedAfter.get(reader) ?? Infinity);
    const out: KeptBytes[] = [];
    let bytes = HISTORY_WRAPPER_BYTES;
    for (let i = stored.length - 1; i >= 0 && out.length < limit; i--) {
      const s = stored[i]!;
      if (s.to && !(s.from === reader.id && s.seq > ownSince) && !(mayReadTargeted && s.to.has(reader.id))) continue;
      if (bytes + s.json.length + 1 > maxBytes) break;
      bytes += s.json.length + 1;
      out.push(s.json);
    }
    pay(bytes);
    return objectOfArray('messages', out.reverse());
  }

  /** A member arrived in the room (see {@link arrivedAfter}). */
  arrived(member: Member): void {
    this.arrivedAfter.set(member, this.keptSeq);
  }

  /** Where a member's subscriptions are counted. */
  private pool(member: Member): Budget {
    return member.domainWide ? this.budgets.domainSubscriptions : this.budgets.subscriptions;
  }

  /** Refuse what would be kept in a room that is gone (its budgets were given back). */
  private live(): void {
    if (this.disposed) throw new RelayError('ROOM_ENDED', 'the room has ended', 'room-ended');
  }

  /** The room is gone: give its history back to the relay's budget. */
  dispose(): void {
    this.disposed = true;
    this.budgets.history.give(this.budgets.history.inUse);
    for (const [member, names] of this.byMember) this.pool(member).give(names.size);
    this.byMember.clear();
    for (let i = this.head; i < this.order.length; i++) if (!this.order[i]!.gone) this.order[i]!.json.free();
    this.topics.clear();
    this.order = [];
    this.head = 0;
    this.goneAhead = 0;
  }
}
