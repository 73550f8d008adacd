/**
 * The relay's media engine, kept behind this small interface so that another SFU engine can
 * replace werift: transports that receive one published track, transports that send one
 * subscription, key-frame requests between them, and stats.
 */
import type { TrackKind } from '../../src/protocol/media.ts';

/** An RTP packet as the engine hands it around (opaque to the rest of the relay). */
export type RtpPacketRef = object;

/**
 * A published track on the relay: its packets, and a way to ask its publisher for a key frame.
 * A simulcast track has several layers, each known by its `rid`; a single-layer track has the
 * one layer `''`.
 */
export interface TrackSource {
  readonly kind: TrackKind;
  /** Layers that delivered packets within the last second. */
  liveLayers(): string[];
  /** Receive the RTP packets of one layer; returns a function that stops. */
  onPacket(layer: string, listener: (packet: RtpPacketRef) => void): () => void;
  /** Ask the publisher for a key frame on a layer (rate-limited by the engine). */
  requestKeyFrame(layer: string): void;
}

/** Counters of a transport. */
export interface TransportStats {
  packets: number;
  bytes: number;
  nacks: number;
  keyFrameRequests: number;
}

/** Receives one published track. */
export interface PublishTransport {
  /** The relay's SDP answer to the client's offer. */
  readonly answer: string;
  /** Resolves once media arrives. */
  readonly track: Promise<TrackSource>;
  /** Called once when the transport fails or closes from the client's side. */
  onClosed(listener: () => void): void;
  stats(): TransportStats;
  close(): void;
}

/** Sends one subscription to one subscriber. */
export interface SubscribeTransport {
  /** The relay's SDP offer. */
  readonly offer: string;
  /** Apply the client's answer; forwarding starts when the transport connects. */
  accept(answer: string): Promise<void>;
  /** Forward one layer of `source` to the subscriber (a key frame is requested when it connects). */
  attach(source: TrackSource, layer: string): void;
  /** Move to another layer, at its next key frame (sequence numbers and timestamps stay continuous). */
  switchLayer(layer: string): void;
  /** The layer forwarded now. */
  readonly layer: string;
  onClosed(listener: () => void): void;
  stats(): TransportStats;
  close(): void;
}

/** A recording of one track to a file, until stopped. */
export interface TrackRecorder {
  stop(): Promise<void>;
}

/** Makes transports, and records tracks. */
export interface MediaEngine {
  publish(kind: TrackKind, offer: string): Promise<PublishTransport>;
  subscribe(kind: TrackKind): Promise<SubscribeTransport>;
  /** Write one layer of a track to `path` as it arrives (WebM for VP8 and Opus). */
  record(source: TrackSource, layer: string, path: string): Promise<TrackRecorder>;
}
