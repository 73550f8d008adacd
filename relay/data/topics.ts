import type { PubSubMessage, ServerFrame } from '../../src/protocol/messages.ts';
import { RelayError } from '../context.ts';
import type { Timeline } from '../rooms/timeline.ts';
import type { Member } from '../rooms/types.ts';

/** Limits of a room's topics. */
export interface TopicLimits {
  historySize: number;
  maxTopicsPerRoom: number;
  maxSubscriptions: number;
}

interface Stored {
  message: PubSubMessage;
  /** Targets of a targeted message; only they (and the sender) ever see it. */
  to?: ReadonlySet<string>;
}

interface Topic {
  subscribers: Set<Member>;
  history: Stored[];
}

/**
 * The pubsub state of one room: who subscribes to what, and each topic's bounded history.
 * A message is serialised once and the same bytes go to every recipient.
 */
export class TopicBoard {
  private readonly topics = new Map<string, Topic>();
  private readonly byMember = new Map<Member, Set<string>>();
  private seq = 0;

  constructor(
    private readonly limits: TopicLimits,
    private readonly lookup: (participantId: string) => Member | undefined,
    private readonly timeline: Timeline,
  ) {}

  private topic(name: string, create: boolean): Topic | undefined {
    let topic = this.topics.get(name);
    if (!topic && create) {
      if (this.topics.size >= this.limits.maxTopicsPerRoom) {
        throw new RelayError('INVALID_ARGUMENT', `this room already has ${this.limits.maxTopicsPerRoom} topics`, 'too-many-topics');
      }
      topic = { subscribers: new Set(), history: [] };
      this.topics.set(name, topic);
    }
    return topic;
  }

  subscribe(member: Member, name: string): void {
    const mine = this.byMember.get(member) ?? new Set<string>();
    if (mine.has(name)) return;
    if (mine.size >= this.limits.maxSubscriptions) {
      throw new RelayError('INVALID_ARGUMENT', `at most ${this.limits.maxSubscriptions} subscriptions per participant`, 'too-many-subscriptions');
    }
    this.topic(name, true)!.subscribers.add(member);
    mine.add(name);
    this.byMember.set(member, mine);
  }

  unsubscribe(member: Member, name: string): void {
    const topic = this.topics.get(name);
    topic?.subscribers.delete(member);
    if (topic && topic.subscribers.size === 0 && topic.history.length === 0) this.topics.delete(name);
    const mine = this.byMember.get(member);
    mine?.delete(name);
    if (mine?.size === 0) this.byMember.delete(member);
  }

  /** Forget every subscription of a member that left. */
  drop(member: Member): void {
    for (const name of [...(this.byMember.get(member) ?? [])]) this.unsubscribe(member, name);
  }

  /**
   * Deliver a message to the topic's subscribers (or those of them in `to`), never back to its
   * sender, and keep it when `persist`. Returns the message and how many received it.
   */
  publish(
    from: Member,
    name: string,
    payload: PubSubMessage['payload'],
    options: { to?: readonly string[]; persist?: boolean },
  ): { message: PubSubMessage; recipients: number } {
    const topic = this.topic(name, options.persist === true);
    const message: PubSubMessage = { id: `m${(++this.seq).toString(36)}`, topic: name, payload, from: from.id, timestamp: Date.now() };
    const to = options.to ? new Set(options.to) : undefined;
    // targeted messages are private: outputs (recordings, captions) only see public ones
    if (!to) this.timeline.emit({ type: 'message', topic: name, from: from.id, payload, id: message.id });
    if (topic && options.persist && this.limits.historySize > 0) {
      topic.history.push(to ? { message, to } : { message });
      if (topic.history.length > this.limits.historySize) topic.history.shift();
    }
    if (!topic) return { message, recipients: 0 };
    const frame: ServerFrame = { type: 'event', name: 'pubsub.message', data: message };
    const data = Buffer.from(JSON.stringify(frame));
    let recipients = 0;
    if (to) {
      // cost of a targeted message: its targets, not the topic's audience
      for (const id of to) {
        const member = this.lookup(id);
        if (member && member !== from && topic.subscribers.has(member)) {
          member.link.sendRaw(data);
          recipients++;
        }
      }
    } else {
      for (const member of topic.subscribers) {
        if (member !== from) {
          member.link.sendRaw(data);
          recipients++;
        }
      }
    }
    return { message, recipients };
  }

  /** The last `limit` persisted messages `reader` may see, oldest first. */
  history(reader: Member, name: string, limit: number): PubSubMessage[] {
    const stored = this.topics.get(name)?.history ?? [];
    const out: PubSubMessage[] = [];
    for (let i = stored.length - 1; i >= 0 && out.length < limit; i--) {
      const s = stored[i]!;
      if (!s.to || s.to.has(reader.id) || s.message.from === reader.id) out.push(s.message);
    }
    return out.reverse();
  }
}
