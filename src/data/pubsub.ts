import type { Connection } from '../connection.ts';
import { call } from '../emitter.ts';
import { SdkError } from '../errors.ts';
import type { JsonValue, PubSubMessage } from '../protocol/messages.ts';

/** Options of {@link PubSub.publish}. */
export interface PublishOptions {
  /** Deliver only to these participant ids (viewers included), live and in history. */
  to?: string[];
  /** Keep the message in the topic's history for later readers. */
  persist?: boolean;
}

/** Options of {@link PubSub.getHistory}. */
export interface HistoryOptions {
  /** At most this many of the latest messages (1 to 1000; default: the relay's history size). */
  limit?: number;
}

/** What {@link PubSub.publish} resolves to. */
export interface Published {
  id: string;
  timestamp: number;
  /** How many subscribers it was delivered to live. */
  recipients: number;
}

/** A topic handler. */
export type MessageHandler = (message: PubSubMessage) => void;

/**
 * Topic-based messages with JSON payloads, targeting and history. `publish` needs
 * `canPublishData`; `subscribe` and `getHistory` need `canSubscribeData` (the relay decides).
 *
 * @example
 * ```ts
 * const off = await room.pubsub.subscribe('chat', ({ from, payload }) => show(from, payload));
 * await room.pubsub.publish('chat', { text: 'hello' }, { persist: true });
 * await room.pubsub.publish('chat', { text: 'psst' }, { to: ['bob'] });
 * const earlier = await room.pubsub.getHistory('chat', { limit: 50 });
 * await off();
 * ```
 */
export class PubSub {
  /** Per topic: the live subscriptions, counted from the moment subscribe() is called. */
  private readonly topics = new Map<string, { subscriptions: Set<{ handler: MessageHandler }>; users: number }>();

  /** @internal */
  constructor(private readonly connection: Connection) {}

  /** Publish `payload` (any JSON value) on `topic`. The relay stamps `id`, `from` and `timestamp`. */
  publish(topic: string, payload: JsonValue, options: PublishOptions = {}): Promise<Published> {
    return this.connection.request('pubsub.publish', {
      topic,
      payload,
      ...(options.to === undefined ? {} : { to: options.to }),
      ...(options.persist === undefined ? {} : { persist: options.persist }),
    });
  }

  /**
   * Receive the messages of `topic`. Resolves, once the relay has accepted the subscription,
   * to a function that ends this subscription (the relay's, with the topic's last one).
   */
  async subscribe(topic: string, handler: MessageHandler): Promise<() => Promise<void>> {
    if (typeof handler !== 'function') throw new SdkError('INVALID_ARGUMENT', `subscribe: the handler must be a function, got ${typeof handler}`);
    let entry = this.topics.get(topic);
    if (!entry) this.topics.set(topic, (entry = { subscriptions: new Set(), users: 0 }));
    // counted before the request, so that a concurrent unsubscribe cannot drop the relay's subscription
    entry.users++;
    try {
      await this.connection.request('pubsub.subscribe', { topic });
    } catch (err) {
      this.release(topic, entry);
      throw err;
    }
    const subscription = { handler };
    entry.subscriptions.add(subscription);
    let ended = false;
    return async () => {
      if (ended) return;
      ended = true;
      entry.subscriptions.delete(subscription);
      // once the session is over, so is every subscription, on both sides: nothing to undo
      if (!this.release(topic, entry) || this.connection.ended) return;
      await this.connection.request('pubsub.unsubscribe', { topic }).catch((err: unknown) => {
        if (!this.connection.ended) throw err;
      });
    };
  }

  /** True when the topic has no subscription left (and is forgotten). */
  private release(topic: string, entry: { users: number }): boolean {
    if (--entry.users > 0 || this.topics.get(topic) !== entry) return false;
    this.topics.delete(topic);
    return true;
  }

  /** The persisted messages of `topic` you may see, oldest first. */
  async getHistory(topic: string, options: HistoryOptions = {}): Promise<PubSubMessage[]> {
    const { messages } = await this.connection.request('pubsub.history', { topic, ...(options.limit === undefined ? {} : { limit: options.limit }) });
    return messages;
  }

  /** @internal After a reconnection: subscribe again to every topic (the relay may have started afresh). */
  async resubscribe(): Promise<void> {
    await Promise.all([...this.topics.keys()].map((topic) => this.connection.request('pubsub.subscribe', { topic }).catch(() => undefined)));
  }

  /** @internal */
  deliver(message: PubSubMessage): void {
    const entry = this.topics.get(message.topic);
    if (entry) for (const { handler } of [...entry.subscriptions]) call(handler, message);
  }
}
