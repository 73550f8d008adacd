import type { RtpPacket } from 'werift';
import type { TrackKind } from '../../src/protocol/media.ts';
import type { TrackSource, TransportStats } from './engine.ts';
import { TokenBucket } from '../data/token-bucket.ts';

/** Key-frame requests to a publisher, at most one per layer in this interval. */
const KEY_FRAME_INTERVAL_MS = 300;
/**
 * What one publication forwards, all its layers together: packets a second, and payload bytes a
 * second as twice the bitrate the relay tells publishers by REMB (2.5 Mbit/s: 625 KB/s), each
 * with a burst of twice that. A publisher that ignores the REMB had every packet copied to every
 * subscriber (7,000 packets of 1,000 bytes a second to 10 subscribers held the relay 60–90 %
 * busy, other rooms' media lost packets). What is over is dropped: only that publication's
 * subscribers see it.
 */
export const PUBLICATION_PACKET_RATE = 1000;
/** Payload bytes a second forwarded for a publisher told `bitrate` bits a second. */
export const publicationByteRate = (bitrate: number) => Math.ceil(bitrate / 4);
const DEFAULT_BITRATE = 2_500_000;
const MIN_BYTE_BURST = 1_000_000;

interface Layer {
  readonly listeners: Set<(packet: RtpPacket) => void>;
  ssrc: number | null;
  lastPacketAt: number;
  lastKeyFrameRequest: number;
  /** A key frame was asked for before the SSRC was known: ask as soon as it is. */
  keyFrameWanted: boolean;
  /** A request that came too soon after the last one, sent when the interval is over. */
  deferred: ReturnType<typeof setTimeout> | null;
}

/**
 * A published track on werift: its layers (by rid), their listeners, and key-frame requests to the
 * publisher, rate-limited per layer.
 */
export class WeriftSource implements TrackSource {
  private readonly layers = new Map<string, Layer>();
  private readonly packetRate = new TokenBucket(PUBLICATION_PACKET_RATE, 2 * PUBLICATION_PACKET_RATE);
  private readonly byteRate: TokenBucket;

  constructor(
    readonly kind: TrackKind,
    private readonly pli: (ssrc: number) => void,
    private readonly counters: TransportStats,
    bitrate = DEFAULT_BITRATE,
  ) {
    const bytes = publicationByteRate(bitrate);
    // a screen's key frame (150–400 KB) passes whatever bitrate the relay asks for
    this.byteRate = new TokenBucket(bytes, Math.max(2 * bytes, MIN_BYTE_BURST));
  }

  private layer(rid: string): Layer {
    let layer = this.layers.get(rid);
    if (!layer) this.layers.set(rid, (layer = { listeners: new Set(), ssrc: null, lastPacketAt: 0, lastKeyFrameRequest: 0, keyFrameWanted: false, deferred: null }));
    return layer;
  }

  ssrcs(): number[] {
    return [...this.layers.values()].flatMap((l) => (l.ssrc === null ? [] : [l.ssrc]));
  }

  liveLayers(): string[] {
    const since = Date.now() - 1000;
    return [...this.layers].filter(([, l]) => l.lastPacketAt >= since).map(([rid]) => rid);
  }

  onPacket(rid: string, listener: (packet: object) => void): () => void {
    const listeners = this.layer(rid).listeners;
    listeners.add(listener as (packet: RtpPacket) => void);
    return () => listeners.delete(listener as (packet: RtpPacket) => void);
  }

  onRtp(rid: string, listener: (rtp: Buffer) => void): () => void {
    return this.onPacket(rid, (packet) => listener((packet as RtpPacket).serialize()));
  }

  deliver(rid: string, packet: RtpPacket): void {
    const layer = this.layer(rid);
    if (!this.packetRate.take(1)) return void (layer.lastPacketAt = Date.now());
    if (!this.byteRate.take(packet.payload.length)) {
      this.packetRate.give(1);
      // over the rate, not silent: the layer is still live for those who choose layers
      return void (layer.lastPacketAt = Date.now());
    }
    this.counters.packets++;
    this.counters.bytes += packet.payload.length;
    // on simulcast tracks the SSRC is only known from packets; key frames can be asked for then
    if (layer.ssrc === null) {
      layer.ssrc = packet.header.ssrc;
      if (layer.keyFrameWanted) this.requestKeyFrame(rid);
    }
    layer.lastPacketAt = Date.now();
    for (const listener of layer.listeners) listener(packet);
  }

  /** Cancel deferred requests (the publication ended). */
  dispose(): void {
    this.disposed = true;
    for (const layer of this.layers.values()) {
      if (layer.deferred) clearTimeout(layer.deferred);
      layer.deferred = null;
      layer.listeners.clear();
    }
  }

  /** Set by `dispose`: a late PLI from a subscriber must not start a timer for a dead track. */
  private disposed = false;

  requestKeyFrame(rid: string): void {
    if (this.kind !== 'video' || this.disposed) return;
    const layer = this.layer(rid);
    const now = Date.now();
    if (layer.ssrc === null) {
      layer.keyFrameWanted = true;
      return;
    }
    const wait = layer.lastKeyFrameRequest + KEY_FRAME_INTERVAL_MS - now;
    if (wait > 0) {
      // deferred, not dropped: a subscriber that connects just after another must still get one
      layer.deferred ??= setTimeout(() => {
        layer.deferred = null;
        this.requestKeyFrame(rid);
      }, wait);
      return;
    }
    layer.keyFrameWanted = false;
    layer.lastKeyFrameRequest = now;
    this.counters.keyFrameRequests++;
    this.pli(layer.ssrc);
  }
}
