import { randomBytes } from 'node:crypto';
import type { Source } from '../../src/protocol/grant.ts';
import { SOURCE_KIND, type LayerInfo, type PreferredSize, type TrackInfo, type TrackKind } from '../../src/protocol/media.ts';
import type { ServerFrame } from '../../src/protocol/messages.ts';
import { RelayError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Member } from '../rooms/member.ts';
import { presenceKey } from '../rooms/presence.ts';
import { PublishFailure, TransportsFull, type MediaEngine, type PublishTransport, type SubscribeTransport, type TrackSource, type TransportStats } from './engine.ts';

interface Publication {
  /** Cleanups of the taps that see it, by tap (a tap that stops is taken out). */
  readonly tapped: Map<TrackTap, () => void>;
  readonly member: Member;
  readonly source: Source;
  readonly kind: TrackKind;
  /** Simulcast layers, smallest first; empty for a single-layer track. */
  readonly layers: LayerInfo[];
  muted: boolean;
  readonly transport: PublishTransport;
  /** Set once its transport connects; only then is the publication announced and subscribable. */
  track: TrackSource | null;
  readonly subscriptions: Set<Subscription>;
}

interface Subscription {
  readonly id: string;
  readonly subscriber: Member;
  readonly publication: Publication;
  readonly transport: SubscribeTransport;
  size: PreferredSize | undefined;
  /** When it was made (performance.now()). */
  readonly madeAt: number;
}

const HEALTH_MS = 1000;

/** Ends a publication may have; those that are failures are logged at `info` and told to the publisher. */
type EndReason = 'unpublished' | 'force-unpublished' | 'publisher-left' | 'transport-failed' | PublishFailure['reason'];
const FAILURES: ReadonlySet<EndReason> = new Set(['transport-failed', 'not-connected', 'no-track']);

/** A publication being negotiated: it holds its source (a second publish of it is refused) until it is in `published`. */
interface Negotiation {
  cancelled: boolean;
}
/** The refusal when the relay holds its most media transports. */
const full = (err: TransportsFull) => new RelayError('RATE_LIMITED', `${err.message}: try again later`, 'media-full');

/** Subscriptions one participant may hold at once: each is a peer connection on the relay. */
export const MAX_SUBSCRIPTIONS = 100;

/**
 * The layer for a size: the largest layer that fits (with a quarter of slack), else the
 * smallest; the largest when no size was asked. Only layers that are flowing count, when any
 * are: a sender under pressure pauses its top layers.
 */
export function chooseLayer(layers: LayerInfo[], live: string[], size?: PreferredSize): string {
  if (layers.length === 0) return '';
  const flowing = layers.filter((l) => live.includes(l.rid));
  const pool = flowing.length ? flowing : layers;
  if (!size) return pool.at(-1)!.rid;
  const fits = pool.filter((l) => l.width <= size.maxWidth * 1.25 && l.height <= size.maxHeight * 1.25);
  return (fits.at(-1) ?? pool[0]!).rid;
}

/** A publication as an output sees it. */
export interface TappedTrack {
  participantId: string;
  source: Source;
  kind: TrackKind;
  /** Record it (its largest flowing layer) to `path`; a write that fails ends the file and calls `failed`. */
  record(path: string, failed?: (error: Error) => void): Promise<{ stop(): Promise<void> }>;
  /** Its RTP packets (its largest flowing layer, chosen now), as bytes; returns a function that stops. */
  rtp(listener: (rtp: Buffer) => void): () => void;
  /** Ask its publisher for a key frame (video; rate-limited by the engine). */
  requestKeyFrame(): void;
  /** Whether packets arrived within the last second. */
  flowing(): boolean;
}

/** Called for each publication with media; may return what to do when it ends. */
export type TrackTap = (track: TappedTrack) => (() => void) | void;

/** What the media board needs of its room. */
export interface MediaRoom {
  broadcast(frame: ServerFrame, exceptId?: string): void;
  log: Logger;
}

/**
 * The media of one room: each published track arrives on its own transport and is forwarded,
 * packet by packet and without decoding, to one transport per subscription.
 */
export class MediaBoard {
  private readonly published = new Map<Member, Map<Source, Publication>>();
  private readonly subscriptions = new Map<string, Subscription>();
  /** The same subscriptions by subscriber: a leave costs its own subscriptions, not the room's. */
  private readonly bySubscriber = new Map<Member, Set<Subscription>>();
  /** Subscriptions of each member waiting for the engine (counted against the cap). */
  private readonly subscribing = new Map<Member, number>();
  /** The last subscription request of each member to each publication: an older one that the engine finishes later gives way. */
  private readonly lastAsked = new Map<Member, Map<Publication, number>>();
  private asked = 0;
  /** Publications whose transport is being made, by member and source. */
  private readonly negotiating = new Map<Member, Map<Source, Negotiation>>();
  /**
   * How many times each member left (a resume counts: its transports belonged to the old
   * connection). A subscription made while it left is closed at once.
   */
  private readonly generation = new WeakMap<Member, number>();

  constructor(
    private readonly engine: MediaEngine | null,
    private readonly room: MediaRoom,
  ) {}

  /** What a member publishes now (announced publications only). */
  tracksOf(member: Member): TrackInfo[] {
    const out: TrackInfo[] = [];
    for (const p of this.published.get(member)?.values() ?? []) if (p.track) out.push({ source: p.source, kind: p.kind, muted: p.muted });
    return out;
  }

  private engineOrFail(): MediaEngine {
    if (!this.engine) throw new RelayError('INVALID_STATE', 'this relay forwards no media (started without a media engine)', 'media-disabled');
    return this.engine;
  }

  /**
   * Negotiate a publication and return the relay's answer. It is announced when its transport
   * connects; if it never does, it ends with its reason (logged at `info`) and its publisher is
   * told by a `track-unpublished` naming itself.
   */
  async publish(member: Member, source: Source, kind: TrackKind, offer: string, layers: LayerInfo[] = []): Promise<string> {
    if (SOURCE_KIND[source] !== kind) throw new RelayError('INVALID_ARGUMENT', `${source} is a ${SOURCE_KIND[source]} source, not ${kind}`, 'wrong-kind');
    const engine = this.engineOrFail();
    if (this.published.get(member)?.has(source) || this.negotiating.get(member)?.has(source)) {
      throw new RelayError('INVALID_STATE', `${source} is already published: unpublish it first`, 'already-published');
    }
    // the source is held from here: a concurrent publish of it is refused, one of another source
    // goes on beside it (issue 16: a publication map read before this await and written after it
    // let the second of two first publications replace the first, which was never announced)
    const negotiation: Negotiation = { cancelled: false };
    const held = this.negotiating.get(member) ?? new Map<Source, Negotiation>();
    held.set(source, negotiation);
    this.negotiating.set(member, held);
    let transport: PublishTransport;
    try {
      transport = await engine.publish(kind, offer, presenceKey(member)).catch((err: Error) => {
        throw err instanceof TransportsFull ? full(err) : new RelayError('INVALID_ARGUMENT', `the offer could not be negotiated: ${err.message}`, 'bad-sdp');
      });
    } finally {
      const now = this.negotiating.get(member);
      if (now?.get(source) === negotiation) now.delete(source);
      if (now?.size === 0) this.negotiating.delete(member);
    }
    if (negotiation.cancelled) {
      transport.close();
      throw new RelayError('NOT_FOUND', `${source} was unpublished (or its publisher left) while it was negotiated`, 'not-published');
    }
    const sorted = [...layers].sort((a, b) => a.width - b.width);
    const publication: Publication = { tapped: new Map(), member, source, kind, layers: sorted, muted: false, transport, track: null, subscriptions: new Set() };
    // read after the await: another publication of this member may have made the map meanwhile
    const mine = this.published.get(member) ?? new Map<Source, Publication>();
    mine.set(source, publication);
    this.published.set(member, mine);
    transport.onClosed(() => this.end(publication, 'transport-failed'));
    transport.track.then(
      (track) => {
        if (this.published.get(member)?.get(source) !== publication) return;
        publication.track = track;
        for (const tap of this.taps) this.feed(tap, publication);
        this.room.broadcast({ type: 'event', name: 'track-published', data: { participantId: member.id, source, kind, muted: publication.muted } }, member.id);
      },
      (err: unknown) => this.end(publication, err instanceof PublishFailure ? err.reason : 'transport-failed', err instanceof Error ? err.message : String(err)),
    );
    return transport.answer;
  }

  private publication(member: Member, source: Source): Publication {
    const p = this.published.get(member)?.get(source);
    if (!p) throw new RelayError('NOT_FOUND', `${member.id} does not publish ${source}`, 'not-published');
    return p;
  }

  unpublish(member: Member, source: Source): void {
    const negotiation = this.negotiating.get(member)?.get(source);
    // unpublished before its answer: its transport is closed when the engine returns it
    if (negotiation && !this.published.get(member)?.has(source)) {
      negotiation.cancelled = true;
      this.negotiating.get(member)!.delete(source);
      return;
    }
    this.end(this.publication(member, source), 'unpublished');
  }

  mute(member: Member, source: Source, muted: boolean): void {
    const p = this.publication(member, source);
    if (p.muted === muted) return;
    p.muted = muted;
    if (p.track) this.room.broadcast({ type: 'event', name: 'track-mute', data: { participantId: member.id, source, muted } }, member.id);
  }

  /** A moderator stops a source: forwarding ends, the publisher and everyone else are told. */
  forceUnpublish(target: Member, source: Source, by: string): void {
    const p = this.publication(target, source);
    target.link.send({ type: 'event', name: 'force-unpublished', data: { source, by } });
    this.end(p, 'force-unpublished');
  }

  /** Subscribe; `superseded`: how long the subscription it replaced had lived (ms), if it replaced one. */
  async subscribe(subscriber: Member, publisher: Member | undefined, source: Source, size?: PreferredSize): Promise<{ subscriptionId: string; sdp: string; superseded?: number }> {
    const p = publisher && this.published.get(publisher)?.get(source);
    if (!p || !p.track) throw new RelayError('NOT_FOUND', `no ${source} of "${publisher?.id ?? '?'}" to subscribe to`, 'not-published');
    if (publisher === subscriber) throw new RelayError('INVALID_ARGUMENT', 'you cannot subscribe to your own track', 'self');
    // subscriptions still negotiating count too: concurrent requests must not pass the cap during the engine's await
    const pending = this.subscribing.get(subscriber) ?? 0;
    if ((this.bySubscriber.get(subscriber)?.size ?? 0) + pending >= MAX_SUBSCRIPTIONS) throw new RelayError('RATE_LIMITED', `at most ${MAX_SUBSCRIPTIONS} subscriptions at once`, 'too-many-subscriptions');
    const generation = this.generation.get(subscriber) ?? 0;
    this.subscribing.set(subscriber, pending + 1);
    const request = ++this.asked;
    let mine = this.lastAsked.get(subscriber);
    if (!mine) this.lastAsked.set(subscriber, (mine = new Map()));
    mine.set(p, request);
    let transport: SubscribeTransport;
    let overtaken = false;
    try {
      transport = await this.engineOrFail()
        .subscribe(p.kind, presenceKey(subscriber), subscriber)
        .catch((err: Error) => {
          throw err instanceof TransportsFull ? full(err) : err;
        });
    } finally {
      const left = (this.subscribing.get(subscriber) ?? 1) - 1;
      if (left > 0) this.subscribing.set(subscriber, left);
      else this.subscribing.delete(subscriber);
      overtaken = mine.get(p) !== request;
      // kept while any of its requests waits: one finished first must not unmark a newer one
      if (left <= 0 && this.lastAsked.get(subscriber) === mine) this.lastAsked.delete(subscriber);
    }
    // asked again meanwhile: the newer request is the one its client waits for, whichever the engine finishes first
    if (overtaken) {
      transport.close();
      throw new RelayError('NOT_FOUND', `a newer subscription of yours to the ${source} of "${p.member.id}" was asked for`, 'replaced');
    }
    // the engine's await is a window: the publication may have ended, the subscriber left
    const track = p.track;
    if (this.published.get(p.member)?.get(source) !== p || (this.generation.get(subscriber) ?? 0) !== generation) {
      transport.close();
      throw new RelayError('NOT_FOUND', `no ${source} of "${p.member.id}" to subscribe to (it ended)`, 'not-published');
    }
    // one subscription of a member to a publication at a time: a new one supersedes the last (its
    // client has moved on). 50 of one camera, each NACKing all the sender keeps, made the relay
    // send 700 times the bytes it was asked
    let superseded: number | undefined;
    for (const old of this.bySubscriber.get(subscriber) ?? []) {
      if (old.publication !== p) continue;
      superseded = performance.now() - old.madeAt;
      this.drop(old, true);
    }
    const subscription: Subscription = { id: randomBytes(9).toString('base64url'), subscriber, publication: p, transport, size, madeAt: performance.now() };
    p.subscriptions.add(subscription);
    this.subscriptions.set(subscription.id, subscription);
    // read after the await, like publications: the set may have been made (or dropped) meanwhile
    const held = this.bySubscriber.get(subscriber) ?? new Set<Subscription>();
    held.add(subscription);
    this.bySubscriber.set(subscriber, held);
    // a transport that fails or never connects ends the subscription; the subscriber is told
    transport.onClosed(() => this.drop(subscription, true));
    transport.attach(track, chooseLayer(p.layers, track.liveLayers(), size));
    if (p.layers.length > 1) this.watchLayers();
    return { subscriptionId: subscription.id, sdp: transport.offer, ...(superseded === undefined ? {} : { superseded }) };
  }

  private subscription(subscriber: Member, id: string): Subscription {
    const s = this.subscriptions.get(id);
    if (!s || s.subscriber !== subscriber) throw new RelayError('NOT_FOUND', 'no such subscription of yours', 'unknown-subscription');
    return s;
  }

  async answer(subscriber: Member, id: string, sdp: string): Promise<void> {
    await this.subscription(subscriber, id).transport.accept(sdp).catch((err: Error) => {
      throw new RelayError('INVALID_ARGUMENT', `the answer could not be applied: ${err.message}`, 'bad-sdp');
    });
  }

  /** A subscriber's new size: the relay picks the layer that fits and switches at its next key frame. */
  setSize(subscriber: Member, id: string, size: PreferredSize): string {
    const s = this.subscription(subscriber, id);
    s.size = size;
    return this.rebalance(s);
  }

  private rebalance(s: Subscription): string {
    const track = s.publication.track;
    if (!track || s.publication.layers.length < 2) return s.transport.layer;
    const layer = chooseLayer(s.publication.layers, track.liveLayers(), s.size);
    s.transport.switchLayer(layer);
    return layer;
  }

  private health: ReturnType<typeof setInterval> | null = null;

  /** While simulcast subscriptions exist, move those whose layer stopped (or came back) every second. */
  private watchLayers(): void {
    if (this.health) return;
    this.health = setInterval(() => {
      let any = false;
      for (const s of this.subscriptions.values()) {
        if (s.publication.layers.length < 2) continue;
        any = true;
        this.rebalance(s);
      }
      if (!any && this.health) {
        clearInterval(this.health);
        this.health = null;
      }
    }, HEALTH_MS);
    this.health.unref?.();
  }

  /** End a subscription of `subscriber`; returns how long it lived (ms). */
  unsubscribe(subscriber: Member, id: string): number {
    const s = this.subscription(subscriber, id);
    this.drop(s, false);
    return performance.now() - s.madeAt;
  }

  /** A member left: its publications end, its subscriptions close. */
  memberLeft(member: Member): void {
    this.generation.set(member, (this.generation.get(member) ?? 0) + 1);
    for (const negotiation of this.negotiating.get(member)?.values() ?? []) negotiation.cancelled = true;
    this.negotiating.delete(member);
    for (const p of [...(this.published.get(member)?.values() ?? [])]) this.end(p, 'publisher-left');
    for (const s of [...(this.bySubscriber.get(member) ?? [])]) this.drop(s, false);
  }

  /** Counters of every transport, for `/metrics` and benchmarks. */
  stats(): { publications: number; subscriptions: number; negotiating: number; in: TransportStats; out: TransportStats } {
    const sum = (list: TransportStats[]) => list.reduce((a, b) => ({ packets: a.packets + b.packets, bytes: a.bytes + b.bytes, nacks: a.nacks + b.nacks, keyFrameRequests: a.keyFrameRequests + b.keyFrameRequests }), { packets: 0, bytes: 0, nacks: 0, keyFrameRequests: 0 });
    const pubs = [...this.published.values()].flatMap((m) => [...m.values()]);
    let negotiating = 0;
    for (const held of this.negotiating.values()) negotiating += held.size;
    return { publications: pubs.length, subscriptions: this.subscriptions.size, negotiating, in: sum(pubs.map((p) => p.transport.stats())), out: sum([...this.subscriptions.values()].map((s) => s.transport.stats())) };
  }

  dispose(): void {
    if (this.health) clearInterval(this.health);
    this.health = null;
    for (const member of new Set([...this.published.keys(), ...this.negotiating.keys(), ...this.bySubscriber.keys()])) this.memberLeft(member);
  }

  private readonly taps = new Set<TrackTap>();

  /** See every publication with media, now and later (e.g. a recording). Returns a function that stops. */
  tap(tap: TrackTap): () => void {
    this.taps.add(tap);
    for (const mine of this.published.values()) for (const p of mine.values()) if (p.track) this.feed(tap, p);
    // its owner ends what it made of each track itself (a stopped output); what stays with a
    // publication is let go: a start and stop in a loop left one closure (and the stopped output
    // it holds) with every live publication
    return () => {
      if (!this.taps.delete(tap)) return;
      for (const mine of this.published.values()) for (const p of mine.values()) p.tapped.delete(tap);
    };
  }

  private feed(tap: TrackTap, p: Publication): void {
    const engine = this.engine;
    const track = p.track;
    if (!engine || !track) return;
    const cleanup = tap({
      participantId: p.member.id,
      source: p.source,
      kind: p.kind,
      record: (path, failed) => engine.record(track, chooseLayer(p.layers, track.liveLayers()), path, failed),
      rtp: (listener) => track.onRtp(chooseLayer(p.layers, track.liveLayers()), listener),
      requestKeyFrame: () => track.requestKeyFrame(chooseLayer(p.layers, track.liveLayers())),
      flowing: () => track.liveLayers().length > 0,
    });
    if (cleanup) p.tapped.set(tap, cleanup);
  }

  private end(p: Publication, why: EndReason, detail?: string): void {
    const mine = this.published.get(p.member);
    if (mine?.get(p.source) !== p) return;
    const cleanups = [...p.tapped.values()];
    p.tapped.clear();
    for (const cleanup of cleanups) cleanup();
    mine.delete(p.source);
    if (mine.size === 0) this.published.delete(p.member);
    for (const s of [...p.subscriptions]) this.drop(s, true);
    p.transport.close();
    const fields = { participant: p.member.id, source: p.source, reason: why, detail };
    if (!FAILURES.has(why)) this.room.log.debug('media: publication ended', fields);
    else {
      this.room.log.info(p.track ? 'media: publication failed' : 'media: publication failed to start', fields);
      // never silence: the publisher hears of it at once (the SDK ends its publication, or
      // rejects its pending publish, with a typed error)
      p.member.link.send({ type: 'event', name: 'track-unpublished', data: { participantId: p.member.id, source: p.source } });
    }
    if (p.track) this.room.broadcast({ type: 'event', name: 'track-unpublished', data: { participantId: p.member.id, source: p.source } }, p.member.id);
  }

  private drop(s: Subscription, tell: boolean): void {
    if (!this.subscriptions.delete(s.id)) return;
    const mine = this.bySubscriber.get(s.subscriber);
    mine?.delete(s);
    if (mine?.size === 0) this.bySubscriber.delete(s.subscriber);
    s.publication.subscriptions.delete(s);
    s.transport.close();
    if (tell) s.subscriber.link.send({ type: 'event', name: 'subscription-ended', data: { subscriptionId: s.id } });
  }
}
