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
  /** Receive the RTP packets of one layer as bytes (for a process outside the engine, e.g. ffmpeg); returns a function that stops. */
  onRtp(layer: string, listener: (rtp: Buffer) => void): () => void;
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

/** Why a publish transport never started. */
export type PublishFailureReason =
  /** ICE and DTLS did not complete in time (the publisher never reached the relay's address). */
  | 'not-connected'
  /** The transport failed or was closed before it connected. */
  | 'transport-failed'
  /** The offer held nothing to receive (no sending m-line). */
  | 'no-track';

/** The rejection of `PublishTransport.track`: a publication that could not start, and why. */
export class PublishFailure extends Error {
  constructor(
    readonly reason: PublishFailureReason,
    message: string,
  ) {
    super(message);
  }
}

/** The engine holds as many transports as it may (`--max-media-transports`): nothing new until some close. */
export class TransportsFull extends Error {
  constructor(
    readonly limit: number,
    /** The share of one owner (a token) that was reached, if that was the limit. */
    readonly share = false,
  ) {
    super(share ? `this token holds its share of the relay's media transports (${limit})` : `the relay holds its most media transports (${limit})`);
  }
}

/** Receives one published track. */
export interface PublishTransport {
  /** The relay's SDP answer to the client's offer. */
  readonly answer: string;
  /**
   * Resolves once the transport is connected (ICE and DTLS done: media can flow), which is when
   * the publication may be announced. Rejects with a {@link PublishFailure} when it cannot start;
   * it never stays pending past the engine's connect timeout or `close()`.
   */
  readonly track: Promise<TrackSource>;
  /** Called once when the transport fails or closes (from either side). */
  onClosed(listener: () => void): void;
  stats(): TransportStats;
  close(): void;
}

/** Sends one subscription to one subscriber. */
export interface SubscribeTransport {
  /** The relay's SDP offer. */
  readonly offer: string;
  /**
   * Apply the client's answer; forwarding starts when the transport connects. A transport that
   * has not connected within the engine's connect timeout closes (and `onClosed` fires).
   */
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
  /** `owner`: whose share of the transports it takes (a token: one holds three quarters of them at most). */
  publish(kind: TrackKind, offer: string, owner?: string): Promise<PublishTransport>;
  /** `member`: whose retransmission budget the subscription draws on (one for all its subscriptions). */
  subscribe(kind: TrackKind, owner?: string, member?: object): Promise<SubscribeTransport>;
  /**
   * Write one layer of a track to `path` as it arrives (WebM for VP8 and Opus). A write that
   * fails (the disk full, no file descriptor left) ends the file and calls `failed` once.
   */
  record(source: TrackSource, layer: string, path: string, failed?: (error: Error) => void): Promise<TrackRecorder>;
}
