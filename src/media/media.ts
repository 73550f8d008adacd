import type { Connection } from '../connection.ts';
import type { Emitter } from '../emitter.ts';
import { SdkError } from '../errors.ts';
import type { Source } from '../protocol/grant.ts';
import { SOURCE_KIND, type PreferredSize, type TrackInfo } from '../protocol/media.ts';
import type { RemoteParticipant } from '../participants/remote-participant.ts';
import type { RoomEvents } from '../room-events.ts';
import { iceGathered, type MediaPlatform } from './platform.ts';
import { LocalTrackPublication, RemoteTrackPublication, type PublicationActions } from './publications.ts';

const TRACK_TIMEOUT_MS = 10_000;

/** Options of `publish`. */
export interface PublishTrackOptions {
  /**
   * Send the video in several sizes so that each subscriber gets the one that fits its tile
   * (default: on for a browser's `camera`).
   */
  simulcast?: boolean;
}

/** Layers for a video track: quarter, half and full size from 540p up, else half and full. */
function simulcastLayers(track: MediaStreamTrack): Array<{ rid: string; scale: number; maxBitrate: number; width: number; height: number }> {
  const { width = 640, height = 480 } = track.getSettings();
  const all = [
    { rid: 'q', scale: 4, maxBitrate: 150_000 },
    { rid: 'h', scale: 2, maxBitrate: 500_000 },
    { rid: 'f', scale: 1, maxBitrate: 1_500_000 },
  ];
  return (height >= 540 ? all : all.slice(1)).map((l) => ({ ...l, width: Math.round(width / l.scale), height: Math.round(height / l.scale) }));
}

/**
 * Media of a room: your publications (one peer connection each) and your subscriptions (one
 * each), negotiated through the relay. Nothing is refused here: every publish and subscribe
 * goes to the relay, which answers `INVALID_PERMISSIONS` when the grant does not allow it.
 */
export class Media implements PublicationActions {
  private readonly local = new Map<Source, LocalTrackPublication>();
  /** Remote publications with a subscription (being set up or live). */
  private readonly active = new Set<RemoteTrackPublication>();
  private resolved: MediaPlatform | null = null;

  constructor(
    private readonly connection: Connection,
    private readonly events: Emitter<RoomEvents>,
    private readonly platform: () => MediaPlatform,
    private readonly autoSubscribe: boolean,
    private readonly participant: (id: string) => RemoteParticipant | undefined,
  ) {}

  private rtc(): MediaPlatform {
    return (this.resolved ??= this.platform());
  }

  /** Your publications by source. */
  get publications(): ReadonlyMap<Source, LocalTrackPublication> {
    return this.local;
  }

  async publish(source: Source, given?: MediaStreamTrack, options: PublishTrackOptions = {}): Promise<LocalTrackPublication> {
    if (this.local.has(source)) throw new SdkError('INVALID_ARGUMENT', `${source} is already published: unpublish it first`, { reason: 'already-published' });
    const rtc = this.rtc();
    let track = given;
    if (!track) {
      const kind = SOURCE_KIND[source];
      const stream = source === 'screen' ? await rtc.getDisplayMedia({ video: true }) : await rtc.getUserMedia(kind === 'video' ? { video: true } : { audio: true });
      track = stream.getTracks()[0];
      if (!track) throw new SdkError('INVALID_ARGUMENT', `no ${kind} track could be captured for ${source}`, { reason: 'no-track' });
    }
    // by default for cameras whose platform can send layers (browser tracks report their settings)
    const simulcast = options.simulcast ?? (source === 'camera' && typeof track.getSettings === 'function');
    let pc: RTCPeerConnection;
    try {
      pc = await this.negotiate(source, track, simulcast);
    } catch (err) {
      if (!given) track.stop();
      throw err;
    }
    const publication = new LocalTrackPublication(source, SOURCE_KIND[source], track, !given, pc, this, simulcast);
    this.local.set(source, publication);
    return publication;
  }

  /** A peer connection that sends `track` to the relay as `source`. */
  private async negotiate(source: Source, track: MediaStreamTrack, simulcast: boolean): Promise<RTCPeerConnection> {
    const pc = new (this.rtc().RTCPeerConnection)({ iceServers: [] });
    try {
      const layers = simulcast && track.kind === 'video' ? simulcastLayers(track) : [];
      pc.addTransceiver(track, {
        direction: 'sendonly',
        ...(layers.length ? { sendEncodings: layers.map((l) => ({ rid: l.rid, scaleResolutionDownBy: l.scale, maxBitrate: l.maxBitrate })) } : {}),
      });
      await pc.setLocalDescription(await pc.createOffer());
      await iceGathered(pc);
      const { sdp } = await this.connection.request('media.publish', {
        source,
        kind: track.kind as 'audio' | 'video',
        sdp: pc.localDescription!.sdp,
        ...(layers.length ? { layers: layers.map(({ rid, width, height }) => ({ rid, width, height })) } : {}),
      });
      await pc.setRemoteDescription({ type: 'answer', sdp });
      return pc;
    } catch (err) {
      pc.close();
      throw err;
    }
  }

  /** @internal After a reconnection the relay has dropped this session's transports: publish and subscribe again. */
  async reestablish(): Promise<void> {
    for (const publication of [...this.local.values()]) {
      publication.pc.close();
      try {
        publication.pc = await this.negotiate(publication.source, publication.track, publication.simulcast);
        if (publication.muted) await this.connection.request('media.mute', { source: publication.source, muted: true });
      } catch {
        this.dropLocal(publication);
        this.events.emit('local-track-unpublished', { publication, reason: 'unpublished' });
      }
    }
    for (const publication of [...this.active]) {
      this.endSubscription(publication);
      const participant = this.participant(publication.participantId);
      if (participant?.trackMap.get(publication.source) === publication) {
        this.subscribe(publication).catch((error: unknown) => this.events.emit('track-subscription-failed', { participant, publication, error: error as SdkError }));
      }
    }
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

  async unpublish(source: Source): Promise<void> {
    const publication = this.local.get(source);
    if (!publication) throw new SdkError('NOT_FOUND', `${source} is not published`, { reason: 'not-published' });
    this.dropLocal(publication);
    await this.connection.request('media.unpublish', { source }).catch((err: SdkError) => {
      if (err.code !== 'NOT_FOUND') throw err;
    });
    this.events.emit('local-track-unpublished', { publication, reason: 'unpublished' });
  }

  async setMuted(publication: LocalTrackPublication, muted: boolean): Promise<void> {
    publication.track.enabled = !muted;
    publication.setMutedState(muted);
    await this.connection.request('media.mute', { source: publication.source, muted });
  }

  private dropLocal(publication: LocalTrackPublication): void {
    if (this.local.get(publication.source) !== publication) return;
    this.local.delete(publication.source);
    publication.pc.close();
    // a track the application gave us is the application's: never stop it
    if (publication.acquired) publication.track.stop();
  }

  /** @internal A moderator stopped one of your sources. */
  forced(source: Source, by: string): void {
    const publication = this.local.get(source);
    if (!publication) return;
    this.dropLocal(publication);
    this.events.emit('local-track-unpublished', { publication, reason: 'force-unpublished', by });
  }

  // ---- remote ---------------------------------------------------------------------------

  /** @internal A publication of a participant, present when it appeared or announced later. */
  added(participant: RemoteParticipant, info: TrackInfo, announce: boolean): void {
    if (participant.trackMap.has(info.source)) return;
    const publication = new RemoteTrackPublication(participant.id, info.source, info.kind, info.muted, this);
    participant.trackMap.set(info.source, publication);
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
    const participant = this.participant(participantId);
    const publication = participant?.trackMap.get(source);
    if (!participant || !publication) return;
    this.endSubscription(publication);
    participant.trackMap.delete(source);
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
    participant.trackMap.clear();
  }

  async subscribe(publication: RemoteTrackPublication): Promise<void> {
    if (publication.subscription) return;
    const rtc = this.rtc();
    const pc = new rtc.RTCPeerConnection({ iceServers: [] });
    const slot = { id: null as string | null, pc };
    publication.subscription = slot;
    this.active.add(publication);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arrived = new Promise<MediaStreamTrack>((resolve, reject) => {
      timer = setTimeout(() => reject(new SdkError('TIMEOUT', `no ${publication.source} track arrived within ${TRACK_TIMEOUT_MS} ms`)), TRACK_TIMEOUT_MS);
      pc.addEventListener('track', (event) => resolve((event as RTCTrackEvent).track));
    });
    arrived.catch(() => undefined);
    try {
      const size = publication.preferredSize;
      const { subscriptionId, sdp } = await this.connection.request('media.subscribe', {
        participantId: publication.participantId,
        source: publication.source,
        ...(size ? { size } : {}),
      });
      slot.id = subscriptionId;
      if (publication.subscription !== slot) {
        void this.connection.request('media.unsubscribe', { subscriptionId }).catch(() => undefined);
        return;
      }
      await pc.setRemoteDescription({ type: 'offer', sdp });
      await pc.setLocalDescription(await pc.createAnswer());
      await iceGathered(pc);
      await this.connection.request('media.answer', { subscriptionId, sdp: pc.localDescription!.sdp });
      const track = await arrived;
      if (publication.subscription !== slot) return;
      publication.setTrack(track);
      const participant = this.participant(publication.participantId);
      if (participant) this.events.emit('track-subscribed', { participant, publication, track });
    } catch (err) {
      if (publication.subscription === slot) {
        publication.subscription = null;
        this.active.delete(publication);
      }
      pc.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async setPreferredSize(publication: RemoteTrackPublication, size: PreferredSize): Promise<void> {
    publication.preferredSize = size;
    const id = publication.subscription?.id;
    if (id) await this.connection.request('media.layer', { subscriptionId: id, size });
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
    const wasSubscribed = publication.subscribed;
    publication.setTrack(null);
    const participant = this.participant(publication.participantId);
    if (wasSubscribed && participant) this.events.emit('track-unsubscribed', { participant, publication });
  }

  /** @internal The session ended: every connection closes; tracks the SDK acquired stop. */
  closed(): void {
    for (const publication of [...this.local.values()]) this.dropLocal(publication);
    for (const publication of this.active) {
      publication.subscription?.pc.close();
      publication.subscription = null;
      publication.setTrack(null);
    }
    this.active.clear();
  }
}
