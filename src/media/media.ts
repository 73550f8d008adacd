import type { Connection } from '../connection.ts';
import type { Emitter } from '../emitter.ts';
import { SdkError } from '../errors.ts';
import type { Source } from '../protocol/grant.ts';
import type { PreferredSize, TrackInfo } from '../protocol/media.ts';
import type { RemoteParticipant } from '../participants/remote-participant.ts';
import { deleteEntry, writeEntry } from '../participants/read-only-map.ts';
import type { RoomEvents } from '../room-events.ts';
import { LocalMedia, type PublishTrackOptions } from './local-media.ts';
import { iceGathered, newPeerConnection, whenConnected, type MediaPlatform } from './platform.ts';
import { LocalTrackPublication, RemoteTrackPublication, type PublicationActions } from './publications.ts';

/** How long a subscription may take, from its request to its connected track. */
const TRACK_TIMEOUT_MS = 10_000;

export type { PublishTrackOptions };

/**
 * Media of a room: your publications (one peer connection each) and your subscriptions (one
 * each), negotiated through the relay. Nothing is refused here: every publish and subscribe
 * goes to the relay, which answers `INVALID_PERMISSIONS` when the grant does not allow it.
 */
export class Media implements PublicationActions {
  private readonly mine: LocalMedia;
  /** Remote publications with a subscription (being set up or live). */
  private readonly active = new Set<RemoteTrackPublication>();
  private resolved: MediaPlatform | null = null;
  /** Your participant id: the relay names it in `track-unpublished` when it ends a publication of yours. */
  private selfId: string | null = null;

  constructor(
    private readonly connection: Connection,
    private readonly events: Emitter<RoomEvents>,
    private readonly platform: () => MediaPlatform,
    private readonly autoSubscribe: boolean,
    private readonly participant: (id: string) => RemoteParticipant | undefined,
  ) {
    this.mine = new LocalMedia(connection, events, () => this.rtc(), this);
  }

  private rtc(): MediaPlatform {
    return (this.resolved ??= this.platform());
  }

  /** @internal Who you are (set by your LocalParticipant). */
  bindSelf(id: string): void {
    this.selfId = id;
  }

  /** Your publications by source. */
  get publications(): ReadonlyMap<Source, LocalTrackPublication> {
    return this.mine.local;
  }

  /** Publish a source; resolves once its media connection is up and the relay announced it. */
  publish(source: Source, given?: MediaStreamTrack, options: PublishTrackOptions = {}): Promise<LocalTrackPublication> {
    return this.mine.publish(source, given, options);
  }

  unpublish(source: Source): Promise<void> {
    return this.mine.unpublish(source);
  }

  setMuted(publication: LocalTrackPublication, muted: boolean): Promise<void> {
    return this.mine.setMuted(publication, muted);
  }

  replaceTrack(publication: LocalTrackPublication, track: MediaStreamTrack): Promise<void> {
    return this.mine.replaceTrack(publication, track);
  }

  switchDevice(publication: LocalTrackPublication, deviceId: string): Promise<void> {
    return this.mine.switchDevice(publication, deviceId);
  }

  /** @internal A moderator stopped one of your sources. */
  forced(source: Source, by: string): void {
    this.mine.forced(source, by);
  }

  /** @internal After a reconnection the relay has dropped this session's transports: publish and subscribe again. */
  async reestablish(): Promise<void> {
    const local = this.mine.reestablish();
    for (const publication of [...this.active]) {
      this.endSubscription(publication);
      const participant = this.participant(publication.participantId);
      if (participant?.trackMap.get(publication.source) === publication) {
        this.subscribe(publication).catch((error: unknown) => this.events.emit('track-subscription-failed', { participant, publication, error: error as SdkError }));
      }
    }
    await local;
  }

  /** @internal After a reconnection: a participant's publications as the relay lists them now. */
  sync(participant: RemoteParticipant, tracks: TrackInfo[]): void {
    const now = new Map(tracks.map((t) => [t.source, t]));
    for (const source of [...participant.trackMap.keys()]) if (!now.has(source)) this.unpublished(participant.id, source);
    for (const info of tracks) {
      if (participant.trackMap.has(info.source)) this.muteChanged(participant.id, info.source, info.muted);
      else this.added(participant, info, true);
    }
  }

  // ---- remote ---------------------------------------------------------------------------

  /** @internal A publication of a participant, present when it appeared or announced later. */
  added(participant: RemoteParticipant, info: TrackInfo, announce: boolean): void {
    if (participant.trackMap.has(info.source)) return;
    const publication = new RemoteTrackPublication(participant.id, info.source, info.kind, info.muted, this);
    writeEntry(participant.trackMap, info.source, publication);
    if (announce) this.events.emit('track-published', { participant, publication });
    if (this.autoSubscribe) {
      this.subscribe(publication).catch((error: unknown) => this.events.emit('track-subscription-failed', { participant, publication, error: error as SdkError }));
    }
  }

  /** @internal */
  published(info: TrackInfo & { participantId: string }): void {
    const participant = this.participant(info.participantId);
    if (participant) this.added(participant, info, true);
  }

  /** @internal */
  unpublished(participantId: string, source: Source): void {
    // the relay ended a publication of yours on its own: its transport failed or never came up
    if (participantId === this.selfId) return this.mine.relayEnded(source);
    const participant = this.participant(participantId);
    const publication = participant?.trackMap.get(source);
    if (!participant || !publication) return;
    this.endSubscription(publication);
    deleteEntry(participant.trackMap, source);
    this.events.emit('track-unpublished', { participant, publication });
  }

  /** @internal */
  muteChanged(participantId: string, source: Source, muted: boolean): void {
    const participant = this.participant(participantId);
    const publication = participant?.trackMap.get(source);
    if (!participant || !publication || publication.muted === muted) return;
    publication.setMutedState(muted);
    this.events.emit(muted ? 'track-muted' : 'track-unmuted', { participant, publication });
  }

  /** @internal The relay ended a subscription (its publication ended). */
  subscriptionEnded(subscriptionId: string): void {
    for (const publication of this.active) if (publication.subscription?.id === subscriptionId) this.endSubscription(publication);
  }

  /** @internal A participant left: its subscriptions close. */
  participantLeft(participant: RemoteParticipant): void {
    for (const publication of participant.trackMap.values()) this.endSubscription(publication);
    for (const source of [...participant.trackMap.keys()]) deleteEntry(participant.trackMap, source);
  }

  subscribe(publication: RemoteTrackPublication): Promise<void> {
    // a second call while one is under way (auto-subscribe, then by hand) waits for the same one
    return publication.subscription?.done ?? this.startSubscription(publication);
  }

  private startSubscription(publication: RemoteTrackPublication): Promise<void> {
    let pc: RTCPeerConnection;
    try {
      pc = newPeerConnection(() => this.rtc(), `subscribe to ${publication.participantId}'s ${publication.source}`);
    } catch (error) {
      // never a throw: a publication listed on joining or on reconnecting (auto-subscribe) must not
      // stop the room being made or brought up to date. The promise rejects on a later turn, so
      // that `track-subscription-failed` for a publication listed on joining comes after
      // `Sdk.join()` resolved, when the application can listen
      return new Promise((_, reject) => setTimeout(() => reject(error), 0));
    }
    const slot: NonNullable<RemoteTrackPublication['subscription']> = { id: null, pc, done: Promise.resolve(), cancel: () => undefined };
    publication.subscription = slot;
    this.active.add(publication);
    slot.done = this.negotiateSubscription(publication, slot);
    return slot.done;
  }

  /**
   * The relay offers, the SDK answers; `track-subscribed` once the track is there and its
   * connection is up. A subscription ended meanwhile (unsubscribed, unpublished) ends quietly.
   */
  private async negotiateSubscription(publication: RemoteTrackPublication, slot: NonNullable<RemoteTrackPublication['subscription']>): Promise<void> {
    const { pc } = slot;
    const what = `subscribe to ${publication.participantId}'s ${publication.source}`;
    const wait = whenConnected(pc, what, TRACK_TIMEOUT_MS);
    // ended by this side (unsubscribed, unpublished, left): stop waiting at once (a browser's
    // close() fires no connectionstatechange)
    slot.cancel = () => wait.abort(new SdkError('NOT_FOUND', `${what}: ended`, { reason: 'ended' }));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arrived = new Promise<MediaStreamTrack>((resolve, reject) => {
      timer = setTimeout(() => reject(new SdkError('TIMEOUT', `no ${publication.source} track arrived within ${TRACK_TIMEOUT_MS} ms`)), TRACK_TIMEOUT_MS);
      pc.addEventListener('track', (event) => resolve((event as RTCTrackEvent).track));
    });
    arrived.catch(() => undefined);
    const live = () => publication.subscription === slot;
    try {
      const size = publication.preferredSize;
      const { subscriptionId, sdp } = await this.connection.request('media.subscribe', {
        participantId: publication.participantId,
        source: publication.source,
        ...(size ? { size } : {}),
      });
      slot.id = subscriptionId;
      slot.sentSize = size;
      if (!live()) {
        void this.connection.request('media.unsubscribe', { subscriptionId }).catch(() => undefined);
        return;
      }
      await pc.setRemoteDescription({ type: 'offer', sdp });
      await pc.setLocalDescription(await pc.createAnswer());
      await iceGathered(pc);
      await this.connection.request('media.answer', { subscriptionId, sdp: pc.localDescription!.sdp });
      const track = await arrived;
      await wait.done;
      if (!live()) return;
      publication.setTrack(track);
      this.watchSubscription(publication, slot);
      // a size given while this subscribed
      void this.sendSize(publication).catch(() => undefined);
      const participant = this.participant(publication.participantId);
      if (participant) this.events.emit('track-subscribed', { participant, publication, track });
    } catch (err) {
      wait.abort(err as Error);
      // ended meanwhile (unsubscribed, unpublished, the session closed): nothing failed
      if (!live()) return;
      publication.subscription = null;
      this.active.delete(publication);
      pc.close();
      if (slot.id) void this.connection.request('media.unsubscribe', { subscriptionId: slot.id }).catch(() => undefined);
      throw err;
    } finally {
      clearTimeout(timer);
      slot.cancel();
    }
  }

  /** A subscription whose connection fails later ends, and the failure is reported. */
  private watchSubscription(publication: RemoteTrackPublication, slot: NonNullable<RemoteTrackPublication['subscription']>): void {
    const { pc } = slot;
    const check = () => {
      if (pc.connectionState !== 'failed') return;
      pc.removeEventListener('connectionstatechange', check);
      if (publication.subscription !== slot) return;
      const id = slot.id;
      this.endSubscription(publication);
      if (id) void this.connection.request('media.unsubscribe', { subscriptionId: id }).catch(() => undefined);
      const participant = this.participant(publication.participantId);
      const error = new SdkError('CONNECTION_FAILED', `${publication.participantId}'s ${publication.source}: the media connection from the relay failed`, { reason: 'media-transport-failed' });
      if (participant) this.events.emit('track-subscription-failed', { participant, publication, error });
    };
    pc.addEventListener('connectionstatechange', check);
  }

  setPreferredSize(publication: RemoteTrackPublication, size: PreferredSize): Promise<void> {
    publication.preferredSize = size;
    return this.sendSize(publication);
  }

  /**
   * Tell the relay the publication's preferred size if it has another: one request at a time
   * per subscription, at most one every {@link LAYER_INTERVAL_MS}, and after it only the latest
   * size (a resize observer calling on every frame would spend the member's message budget
   * otherwise: a gallery being resized sent a request per tile per round trip). Every caller
   * meanwhile waits for the same requests.
   */
  private sendSize(publication: RemoteTrackPublication): Promise<void> {
    const slot = publication.subscription;
    if (!slot?.id) return Promise.resolve();
    if (slot.sizing) return slot.sizing;
    if (sameSize(slot.sentSize, publication.preferredSize)) return Promise.resolve();
    const subscriptionId = slot.id;
    const sizing = (async () => {
      // `slot.sizing` is this promise before anything below runs, and cleared in the same step as the loop's last check
      await undefined;
      try {
        for (let size = publication.preferredSize; size && publication.subscription === slot && !sameSize(slot.sentSize, size); size = publication.preferredSize) {
          const wait = (slot.sizedAt ?? -Infinity) + LAYER_INTERVAL_MS - Date.now();
          if (wait > 0) {
            await new Promise((resolve) => setTimeout(resolve, wait));
            continue;
          }
          slot.sizedAt = Date.now();
          await this.connection.request('media.layer', { subscriptionId, size });
          slot.sentSize = size;
        }
      } finally {
        slot.sizing = null;
      }
    })();
    slot.sizing = sizing;
    return sizing;
  }

  async unsubscribe(publication: RemoteTrackPublication): Promise<void> {
    const slot = publication.subscription;
    if (!slot) return;
    this.endSubscription(publication);
    if (slot.id) await this.connection.request('media.unsubscribe', { subscriptionId: slot.id }).catch(() => undefined);
  }

  private endSubscription(publication: RemoteTrackPublication): void {
    const slot = publication.subscription;
    if (!slot) return;
    publication.subscription = null;
    this.active.delete(publication);
    slot.pc.close();
    slot.cancel();
    const wasSubscribed = publication.subscribed;
    publication.setTrack(null);
    const participant = this.participant(publication.participantId);
    if (wasSubscribed && participant) this.events.emit('track-unsubscribed', { participant, publication });
  }

  /** @internal The session ended: every connection closes; tracks the SDK acquired stop. */
  closed(): void {
    this.mine.closed();
    for (const publication of this.active) {
      const slot = publication.subscription;
      publication.subscription = null;
      slot?.pc.close();
      slot?.cancel();
      publication.setTrack(null);
    }
    this.active.clear();
  }
}

function sameSize(a: PreferredSize | undefined, b: PreferredSize | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.maxWidth === b.maxWidth && a.maxHeight === b.maxHeight);
}

/**
 * The least time between two layer requests of one subscription (ms): the relay switches at the
 * next key frame, which it asks the publisher for at most every 300 ms, so sooner is no faster.
 */
const LAYER_INTERVAL_MS = 500;
