import type { Connection } from '../connection.ts';
import type { Emitter } from '../emitter.ts';
import { SdkError } from '../errors.ts';
import type { Source } from '../protocol/grant.ts';
import { SOURCE_KIND } from '../protocol/media.ts';
import type { RoomEvents } from '../room-events.ts';
import { iceGathered, newPeerConnection, whenConnected, type MediaPlatform } from './platform.ts';
import { LocalTrackPublication, type PublicationActions } from './publications.ts';

/**
 * How long a publication's media connection may take to come up, from the start of its
 * negotiation. The relay gives up 8 s after its answer and tells the publisher, so its verdict
 * (logged there with its reason) normally comes first.
 */
const CONNECT_TIMEOUT_MS = 15_000;

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

/** A publish between its request and its media connection: what can end it early. */
interface Starting {
  /** The relay answered: it holds the publication, and a verdict of its own may now come. */
  answered: boolean;
  abort(error: Error): void;
}

/**
 * Your publications. Operations on one source (publish, unpublish, mute, track replacement, the
 * re-publication after a reconnection) run one after another in the order they were called, so
 * any interleaving of calls has the effect of that order; different sources run side by side.
 */
export class LocalMedia {
  readonly local = new Map<Source, LocalTrackPublication>();
  private readonly queues = new Map<Source, Promise<unknown>>();
  private readonly starting = new Map<Source, Starting>();
  private ended = false;

  constructor(
    private readonly connection: Connection,
    private readonly events: Emitter<RoomEvents>,
    private readonly rtc: () => MediaPlatform,
    private readonly actions: PublicationActions,
  ) {}

  /** Run `op` after every operation already queued on `source`, whatever their outcome. */
  private serial<T>(source: Source, op: () => Promise<T>): Promise<T> {
    const next = (this.queues.get(source) ?? Promise.resolve()).then(op, op);
    const tail = next.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(source, tail);
    void tail.then(() => {
      if (this.queues.get(source) === tail) this.queues.delete(source);
    });
    return next;
  }

  publish(source: Source, given?: MediaStreamTrack, options: PublishTrackOptions = {}): Promise<LocalTrackPublication> {
    return this.serial(source, async () => {
      if (this.local.has(source)) throw new SdkError('INVALID_STATE', `${source} is already published: unpublish it first`, { reason: 'already-published' });
      const track = given ?? (await this.capture(source));
      // by default for cameras whose platform can send layers (browser tracks report their settings)
      const simulcast = options.simulcast ?? (source === 'camera' && typeof track.getSettings === 'function');
      let pc: RTCPeerConnection;
      try {
        pc = await this.start(source, track, simulcast);
      } catch (err) {
        if (!given) track.stop();
        throw err;
      }
      const publication = new LocalTrackPublication(source, SOURCE_KIND[source], track, !given, pc, this.actions, simulcast);
      this.local.set(source, publication);
      this.watch(publication, pc);
      return publication;
    });
  }

  /** Capture a device for `source` (the SDK then owns the track and stops it). */
  private async capture(source: Source, deviceId?: string): Promise<MediaStreamTrack> {
    if (this.ended) throw new SdkError('NOT_CONNECTED', `publish ${source}: the session has ended`, { reason: 'left' });
    const rtc = this.rtc();
    const kind = SOURCE_KIND[source];
    const device = deviceId ? { deviceId: { exact: deviceId } } : true;
    const stream = source === 'screen' ? await rtc.getDisplayMedia({ video: true }) : await rtc.getUserMedia(kind === 'video' ? { video: device } : { audio: device });
    const track = stream.getTracks()[0];
    if (!track) throw new SdkError('INVALID_ARGUMENT', `no ${kind} track could be captured for ${source}`, { reason: 'no-track' });
    return track;
  }

  /**
   * A peer connection that sends `track` to the relay as `source`, returned once it is
   * connected (so the relay has announced it). On failure nothing is left behind: the peer
   * connection is closed and the relay told to drop its side.
   */
  private async start(source: Source, track: MediaStreamTrack, simulcast: boolean): Promise<RTCPeerConnection> {
    if (this.ended) throw new SdkError('NOT_CONNECTED', `publish ${source}: the session has ended`, { reason: 'left' });
    const pc = newPeerConnection(this.rtc, `publish ${source}`);
    const wait = whenConnected(pc, `publish ${source}`, CONNECT_TIMEOUT_MS);
    const starting: Starting = { answered: false, abort: wait.abort };
    this.starting.set(source, starting);
    // whether the relay may hold a publication for this attempt: asked, and not refused
    let held = false;
    try {
      const layers = simulcast && track.kind === 'video' ? simulcastLayers(track) : [];
      pc.addTransceiver(track, {
        direction: 'sendonly',
        ...(layers.length ? { sendEncodings: layers.map((l) => ({ rid: l.rid, scaleResolutionDownBy: l.scale, maxBitrate: l.maxBitrate })) } : {}),
      });
      await pc.setLocalDescription(await pc.createOffer());
      await iceGathered(pc);
      const request = this.connection.request('media.publish', {
        source,
        kind: track.kind as 'audio' | 'video',
        sdp: pc.localDescription!.sdp,
        ...(layers.length ? { layers: layers.map(({ rid, width, height }) => ({ rid, width, height })) } : {}),
      });
      held = true;
      request.catch(() => (held = false));
      // an abort (the session ended, a reconnection, a moderator) need not wait for the answer
      const { sdp } = await Promise.race([request, wait.done.then(() => request)]);
      starting.answered = true;
      await pc.setRemoteDescription({ type: 'answer', sdp });
      await wait.done;
      if (this.ended) throw new SdkError('NOT_CONNECTED', `publish ${source}: the session has ended`, { reason: 'left' });
      return pc;
    } catch (err) {
      wait.abort(err as Error);
      pc.close();
      // the relay may hold its side (its answer came, or is still coming): let it go
      if (held && !this.ended) void this.connection.request('media.unpublish', { source }).catch(() => undefined);
      throw err;
    } finally {
      if (this.starting.get(source) === starting) this.starting.delete(source);
    }
  }

  /** After it connected: a failure later ends the publication, and you are told. */
  private watch(publication: LocalTrackPublication, pc: RTCPeerConnection): void {
    const check = () => {
      if (pc.connectionState !== 'failed' && pc.connectionState !== 'closed') return;
      pc.removeEventListener('connectionstatechange', check);
      // a connection this side replaced or closed on purpose is no news
      if (publication.pc !== pc || this.local.get(publication.source) !== publication) return;
      this.fail(publication, new SdkError('CONNECTION_FAILED', `your ${publication.source}: the media connection to the relay ${pc.connectionState}`, { reason: 'media-transport-failed' }));
    };
    pc.addEventListener('connectionstatechange', check);
  }

  private fail(publication: LocalTrackPublication, error: SdkError): void {
    if (!this.drop(publication)) return;
    void this.connection.request('media.unpublish', { source: publication.source }).catch(() => undefined);
    publication.setEnded('failed', error);
    this.events.emit('local-track-unpublished', { publication, reason: 'failed', error });
  }

  /** Forget a publication and release it; false if it was not the current one. */
  private drop(publication: LocalTrackPublication): boolean {
    if (this.local.get(publication.source) !== publication) return false;
    this.local.delete(publication.source);
    release(publication);
    return true;
  }

  unpublish(source: Source): Promise<void> {
    return this.serial(source, async () => {
      const publication = this.local.get(source);
      if (!publication) throw new SdkError('NOT_FOUND', `${source} is not published`, { reason: 'not-published' });
      this.local.delete(source);
      try {
        // told before the connection closes: a transport closing first would look like a failure to the relay
        await this.connection.request('media.unpublish', { source }).catch((err: SdkError) => {
          if (err.code !== 'NOT_FOUND' && err.code !== 'NOT_CONNECTED') throw err;
        });
      } finally {
        release(publication);
        publication.setEnded('unpublished');
        this.events.emit('local-track-unpublished', { publication, reason: 'unpublished' });
      }
    });
  }

  setMuted(publication: LocalTrackPublication, muted: boolean): Promise<void> {
    return this.serial(publication.source, async () => {
      this.current(publication);
      // muting stops the media at once (nothing should leave while the relay is asked); unmuting
      // sends again only once the room has been told, and `muted` is the relay's answer either way
      if (muted) publication.track.enabled = false;
      try {
        await this.connection.request('media.mute', { source: publication.source, muted });
      } catch (err) {
        publication.track.enabled = !publication.muted;
        throw err;
      }
      publication.setMutedState(muted);
      publication.track.enabled = !muted;
    });
  }

  replaceTrack(publication: LocalTrackPublication, track: MediaStreamTrack, acquired = false): Promise<void> {
    return this.serial(publication.source, async () => {
      this.current(publication);
      if (track.kind !== publication.kind) throw new SdkError('INVALID_ARGUMENT', `${publication.source} sends ${publication.kind}, not ${track.kind}`, { reason: 'wrong-kind' });
      const old = publication.track;
      if (old === track) return;
      const sender = publication.pc.getSenders()[0];
      if (!sender) throw new SdkError('INVALID_ARGUMENT', `${publication.source} has no sender to replace its track`, { reason: 'no-sender' });
      track.enabled = !publication.muted;
      await sender.replaceTrack(track);
      const wasAcquired = publication.acquired;
      publication.setTrack(track, acquired);
      if (wasAcquired) old.stop();
    });
  }

  async switchDevice(publication: LocalTrackPublication, deviceId: string): Promise<void> {
    const track = await this.capture(publication.source, deviceId);
    try {
      await this.replaceTrack(publication, track, true);
    } catch (err) {
      track.stop();
      throw err;
    }
  }

  private current(publication: LocalTrackPublication): void {
    if (this.local.get(publication.source) !== publication) {
      throw new SdkError('NOT_FOUND', `${publication.source} is not published (any more)`, { reason: 'not-published' });
    }
  }

  /** The relay ended a publication of yours on its own (its transport failed or never came up). */
  relayEnded(source: Source): void {
    const starting = this.starting.get(source);
    if (starting?.answered) {
      starting.abort(new SdkError('CONNECTION_FAILED', `publish ${source}: the relay's side of the media connection did not come up`, { reason: 'media-not-connected' }));
      return;
    }
    const publication = this.local.get(source);
    if (publication) this.fail(publication, new SdkError('CONNECTION_FAILED', `your ${source}: the relay lost its media connection`, { reason: 'media-transport-failed' }));
  }

  /** A moderator stopped one of your sources (`publish` of it may still be starting). */
  forced(source: Source, by: string): void {
    this.starting.get(source)?.abort(new SdkError('INVALID_PERMISSIONS', `${by} stopped your ${source}`, { reason: 'force-unpublished' }));
    const publication = this.local.get(source);
    if (!publication || !this.drop(publication)) return;
    publication.setEnded('unpublished');
    this.events.emit('local-track-unpublished', { publication, reason: 'force-unpublished', by });
  }

  /** After a reconnection the relay has dropped this session's transports: publish again. */
  async reestablish(): Promise<void> {
    // like any call in flight at a drop (the relay dropped what it had made of them)
    for (const [source, starting] of this.starting) starting.abort(new SdkError('CONNECTION_LOST', `publish ${source}: the connection was lost while it was negotiated`));
    await Promise.all(
      [...this.local.values()].map((publication) =>
        this.serial(publication.source, async () => {
          if (this.local.get(publication.source) !== publication) return;
          const old = publication.pc;
          try {
            const pc = await this.start(publication.source, publication.track, publication.simulcast);
            publication.pc = pc;
            old.close();
            this.watch(publication, pc);
            if (publication.muted) await this.connection.request('media.mute', { source: publication.source, muted: true });
          } catch (err) {
            this.fail(publication, err instanceof SdkError ? err : new SdkError('CONNECTION_FAILED', String(err), { reason: 'media-transport-failed' }));
          }
        }),
      ),
    );
  }

  /** The session ended: starts are abandoned, connections close, tracks the SDK acquired stop. */
  closed(): void {
    this.ended = true;
    for (const starting of this.starting.values()) starting.abort(new SdkError('NOT_CONNECTED', 'the session has ended', { reason: 'left' }));
    for (const publication of [...this.local.values()]) {
      this.drop(publication);
      publication.setEnded('unpublished');
    }
  }
}

/** Close a publication's connection and stop its track if the SDK captured it (a track the application gave is the application's). */
function release(publication: LocalTrackPublication): void {
  publication.pc.close();
  if (publication.acquired) publication.track.stop();
}
