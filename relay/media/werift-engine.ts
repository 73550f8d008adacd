import {
  MediaStreamTrack,
  ReceiverEstimatedMaxBitrate,
  RTCPeerConnection,
  RTCRtpCodecParameters,
  RtcpPayloadSpecificFeedback,
  type RTCRtpReceiver,
  type RtpPacket,
  useRepairedRtpStreamId,
  useSdesMid,
  useSdesRTPStreamId,
} from 'werift';
import type { TrackKind } from '../../src/protocol/media.ts';
import { Event, MediaRecorder, type WebmOutput } from 'werift/nonstandard';
import { WebmFile } from './webm-file.ts';
import { PublishFailure, TransportsFull, type MediaEngine, type PublishTransport, type SubscribeTransport, type TrackRecorder, type TrackSource, type TransportStats } from './engine.ts';
import { installIceGuard } from './ice-guard.ts';
import { remoteSdp } from './remote-sdp.ts';
import { installUdpErrorHandling } from './udp-errors.ts';
import { boundNackHandler, installWeriftHardening, OWNER_RETRANSMIT_RATE, shareRetransmissions } from './werift-hardening.ts';
import { TokenBucket } from '../data/token-bucket.ts';
import { isVp8KeyFrameStart } from './vp8.ts';
import { WeriftSource } from './werift-source.ts';

/** What of werift's WebM writer (0.25) the relay drives itself; checked, so that an upgrade cannot silently change it. */
interface Muxer {
  rtpSources: Array<{ stop(): unknown }>;
  unSubscribers: { dispose(): void };
}

function muxerOf(recorder: MediaRecorder): Muxer {
  const writer = recorder.writer as unknown as Partial<Muxer>;
  if (!Array.isArray(writer.rtpSources) || typeof writer.unSubscribers?.dispose !== 'function') throw new Error("werift's MediaRecorder no longer has the WebM writer the relay drives (rtpSources, unSubscribers)");
  return writer as Muxer;
}

/** How long a transport may take to connect (ICE and DTLS) before it is given up. */
const CONNECT_TIMEOUT_MS = 8_000;

/**
 * Codecs the relay negotiates: VP8 with NACK and PLI (no transport-wide congestion control:
 * werift's feedback drove Chromium down to 30 kbps on this machine), Opus for audio.
 */
function codecs() {
  return {
    video: [
      new RTCRtpCodecParameters({
        mimeType: 'video/VP8',
        clockRate: 90000,
        payloadType: 96,
        rtcpFeedback: [{ type: 'nack' }, { type: 'nack', parameter: 'pli' }, { type: 'goog-remb' }],
      }),
    ],
    audio: [new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111 })],
  };
}

/** Where the relay listens for media and what it announces. */
export interface WeriftOptions {
  /** The address announced in ICE candidates (and the one media is received on). */
  mediaIp: string;
  /** The bitrate a publisher's video may use, told to it by REMB every second (default 2.5 Mbps). */
  maxVideoBitrate?: number;
  /**
   * How long a transport may take to connect before it is given up (default 8 s: shorter than
   * the SDK's own 10 s, so that the relay's verdict, logged with its reason, comes first).
   */
  connectTimeoutMs?: number;
  /**
   * Peer connections the engine holds at once, publications and subscriptions of every room
   * together (default 500): each holds a UDP socket, DTLS and SRTP state and buffers (a few MiB),
   * so that members, each within its own limits, cannot together exhaust the relay's memory.
   */
  maxTransports?: number;
}

/** The default of {@link WeriftOptions.maxTransports}. */
export const MAX_TRANSPORTS = 500;

const REMB_INTERVAL_MS = 1000;

/**
 * Tell a publisher how much it may send (REMB). The relay measures no bandwidth: this is a
 * fixed cap, enough for Chromium to send every simulcast layer on a LAN; its own loss-based
 * control still backs off when packets are lost.
 */
function sendRemb(receiver: RTCRtpReceiver, ssrcs: number[], bitrate: number): void {
  let mantissa = Math.round(bitrate);
  let exp = 0;
  while (mantissa >= 1 << 18) {
    mantissa = Math.floor(mantissa / 2);
    exp++;
  }
  const feedback = new ReceiverEstimatedMaxBitrate({ senderSsrc: receiver.rtcpSsrc, mediaSsrc: 0, ssrcNum: ssrcs.length, brExp: exp, brMantissa: mantissa, ssrcFeedbacks: ssrcs });
  void receiver.dtlsTransport.sendRtcp([new RtcpPayloadSpecificFeedback({ feedback })]).catch(() => undefined);
}

const zero = (): TransportStats => ({ packets: 0, bytes: 0, nacks: 0, keyFrameRequests: 0 });

/** The werift implementation of the media engine: one peer connection per transport, ICE lite. */
export class WeriftEngine implements MediaEngine {
  constructor(private readonly options: WeriftOptions) {
    // what any host on the network sends to the media ports: checked before werift sees it
    installIceGuard();
    // ...and what a member itself sends, once authenticated, bounded where werift trusts it
    installWeriftHardening();
    // ...and its sockets' errors (a bind to an address not on this host) never end the process
    installUdpErrorHandling();
  }

  /** Peer connections made and not yet closed (a leak check for tests and `/metrics`). */
  get openTransports(): number {
    return this.open.size;
  }

  private readonly open = new Set<RTCPeerConnection>();
  /** The owner of each open transport, and how many each holds. */
  private readonly ownerOf = new Map<RTCPeerConnection, string>();
  private readonly byOwner = new Map<string, number>();
  /** Each member's retransmissions, for all its subscriptions ({@link OWNER_RETRANSMIT_RATE}). */
  private readonly retransmitsOf = new WeakMap<object, TokenBucket>();

  /**
   * A new peer connection, within the relay's limit, and within three quarters of it for one
   * owner (a token): a shared token's members subscribing in a loop and never answering held the
   * whole pool (149 of 150 within 400 ms, again as the unanswered ones timed out), and every other
   * member of every room on the node got `media-full`. A quarter stays for every other token;
   * one shared audience token still has the rest.
   */
  private peer(owner?: string): RTCPeerConnection {
    const limit = this.options.maxTransports ?? MAX_TRANSPORTS;
    if (this.open.size >= limit) throw new TransportsFull(limit);
    const share = Math.max(1, Math.floor((limit * 3) / 4));
    if (owner !== undefined && (this.byOwner.get(owner) ?? 0) >= share) throw new TransportsFull(share, true);
    const ip = this.options.mediaIp;
    const pc = new RTCPeerConnection({
      iceLite: true,
      iceServers: [],
      iceUseIpv6: false,
      iceInterfaceAddresses: { udp4: ip },
      iceAdditionalHostAddresses: ip.startsWith('127.') ? [ip] : [],
      codecs: codecs(),
      headerExtensions: { video: [useSdesMid(), useSdesRTPStreamId(), useRepairedRtpStreamId()], audio: [useSdesMid()] },
    });
    this.open.add(pc);
    if (owner !== undefined) {
      this.ownerOf.set(pc, owner);
      this.byOwner.set(owner, (this.byOwner.get(owner) ?? 0) + 1);
    }
    return pc;
  }

  /** Close a peer connection made here, whatever its state (werift's close is idempotent). */
  private closePeer(pc: RTCPeerConnection): void {
    this.open.delete(pc);
    const owner = this.ownerOf.get(pc);
    if (owner !== undefined) {
      this.ownerOf.delete(pc);
      const left = (this.byOwner.get(owner) ?? 1) - 1;
      if (left > 0) this.byOwner.set(owner, left);
      else this.byOwner.delete(owner);
    }
    void pc.close().catch(() => undefined);
  }

  /**
   * One transport per published track. The track is announced (`track` resolves) when the
   * transport connects, not when werift fires `onTrack`: werift fires that while applying the
   * offer (transceiverManager.setRemoteRTP), before the publisher can even have the answer, so it
   * proves nothing about media reaching the relay.
   */
  async publish(kind: TrackKind, offer: string, owner?: string): Promise<PublishTransport> {
    const pc = this.peer(owner);
    const counters = zero();
    const closed = watchClosed(pc);
    let remb: ReturnType<typeof setInterval> | null = null;
    let timer: ReturnType<typeof setTimeout> | null = null;
    let source: WeriftSource | null = null;
    let settle: (failure: PublishFailure | null) => void = () => undefined;
    const track = new Promise<TrackSource>((resolve, reject) => {
      settle = (failure) => {
        settle = () => undefined;
        if (timer) clearTimeout(timer);
        timer = null;
        if (failure) reject(failure);
        else if (source) resolve(source);
        else reject(new PublishFailure('no-track', 'the offer has no track to send'));
      };
    });
    track.catch(() => undefined);
    const wired = new Set<MediaStreamTrack>();
    // werift announces a transceiver once; its receiver holds one track per simulcast layer (by rid)
    pc.onTrack.subscribe((t) => {
      const transceiver = pc.getTransceivers().find((tr) => tr.receiver.tracks.includes(t) || tr.receiver.track === t);
      if (!source) {
        const created = new WeriftSource(kind, (ssrc) => void transceiver?.receiver.sendRtcpPLI(ssrc), counters, this.options.maxVideoBitrate ?? 2_500_000);
        source = created;
        transceiver?.receiver.onPacketLost.subscribe(() => counters.nacks++);
        if (kind === 'video' && transceiver) {
          const receiver = transceiver.receiver;
          remb = setInterval(() => {
            const ssrcs = created.ssrcs();
            if (ssrcs.length) sendRemb(receiver, ssrcs, this.options.maxVideoBitrate ?? 2_500_000);
          }, REMB_INTERVAL_MS);
        }
      }
      const s = source;
      const layers = transceiver && transceiver.receiver.tracks.length > 0 ? transceiver.receiver.tracks : [t];
      for (const layer of layers) {
        if (wired.has(layer)) continue;
        wired.add(layer);
        const rid = layer.rid ?? '';
        layer.onReceiveRtp.subscribe((packet) => s.deliver(rid, packet));
      }
    });
    pc.connectionStateChange.subscribe((state) => {
      if (state === 'connected') settle(null);
      else if (state === 'failed' || state === 'closed') settle(new PublishFailure('transport-failed', `the transport ${state} before it connected`));
    });
    const close = () => {
      if (remb) clearInterval(remb);
      remb = null;
      settle(new PublishFailure('transport-failed', 'the transport was closed before it connected'));
      source?.dispose();
      this.closePeer(pc);
    };
    closed.on(close);
    try {
      await pc.setRemoteDescription({ type: 'offer', sdp: remoteSdp(offer) });
      // werift does not export its NACK handler: bounded through the first receiver made
      for (const transceiver of pc.getTransceivers()) boundNackHandler((transceiver.receiver as unknown as { nack: object }).nack);
      const answer = await pc.createAnswer();
      await pc.setLocalDescription(answer);
    } catch (err) {
      close();
      throw err;
    }
    const limit = this.options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    // armed once the answer exists: the publisher cannot start connecting before it has it
    if (pc.connectionState !== 'connected') timer = setTimeout(() => settle(new PublishFailure('not-connected', `ICE and DTLS did not complete within ${limit} ms`)), limit);
    return {
      answer: pc.localDescription!.sdp,
      track,
      onClosed: closed.on,
      stats: () => ({ ...counters }),
      close,
    };
  }

  async record(source: TrackSource, layer: string, path: string, failed: (error: Error) => void = () => undefined): Promise<TrackRecorder> {
    const codec = source.kind === 'video' ? codecs().video[0]! : codecs().audio[0]!;
    const track = new MediaStreamTrack({ kind: source.kind, codec });
    // werift muxes, the relay writes the file (`webm-file.ts`: werift's own writes could end the process)
    let told = false;
    const once = (error: Error) => {
      if (!told) failed(error);
      told = true;
    };
    const file = new WebmFile(path, once);
    const output = new Event<[WebmOutput]>();
    output.subscribe((o) => file.take(o));
    // one track per file: nothing to synchronise with, timing from RTP timestamps alone
    const recorder = new MediaRecorder({ stream: output, tracks: [track], numOfTracks: 1, disableLipSync: true, disableNtp: true });
    recorder.onError.subscribe(once);
    let muxer: Muxer;
    try {
      muxer = muxerOf(recorder);
    } catch (error) {
      void file.close(0);
      throw error;
    }
    const off = source.onPacket(layer, (p) => track.writeRtp(p as RtpPacket));
    // a recording starts at a key frame
    source.requestKeyFrame(layer);
    return {
      stop: async () => {
        off();
        // the end of each source flows to the muxer, which puts out its end (not recorder.stop(),
        // which in stream mode waits 5 s for an end it only notices in file mode)
        await Promise.all(muxer.rtpSources.map((r) => r.stop()));
        await file.close(5000);
        muxer.unSubscribers.dispose();
      },
    };
  }

  async subscribe(kind: TrackKind, owner?: string, member?: object): Promise<SubscribeTransport> {
    const pc = this.peer(owner);
    const counters = zero();
    const closed = watchClosed(pc);
    const transceiver = pc.addTransceiver(new MediaStreamTrack({ kind }), { direction: 'sendonly' });
    const sender = transceiver.sender;
    if (member !== undefined) {
      let bucket = this.retransmitsOf.get(member);
      if (!bucket) this.retransmitsOf.set(member, (bucket = new TokenBucket(OWNER_RETRANSMIT_RATE, OWNER_RETRANSMIT_RATE)));
      shareRetransmissions(sender, bucket);
    }
    try {
      await pc.setLocalDescription(await pc.createOffer());
    } catch (err) {
      this.closePeer(pc);
      throw err;
    }
    // a subscriber that never answers or never connects must not hold a peer connection forever
    const limit = this.options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    let timer: ReturnType<typeof setTimeout> | null = setTimeout(() => {
      timer = null;
      this.closePeer(pc);
      closed.fire();
    }, limit);
    let source: TrackSource | null = null;
    let current = '';
    let stopCurrent: (() => void) | null = null;
    let pending: { layer: string; stop: () => void } | null = null;
    /** An answer being applied (see `accept`). */
    let answering = false;
    const send = (p: object) => {
      const packet = (p as RtpPacket).clone();
      // the publisher's header extensions mean nothing on this transport: werift writes its own
      packet.header.extensions = [];
      counters.packets++;
      counters.bytes += packet.payload.length;
      void sender.sendRtp(packet).catch(() => undefined);
    };
    sender.onPictureLossIndication.subscribe(() => source?.requestKeyFrame(current));
    sender.onGenericNack.subscribe(() => counters.nacks++);
    pc.connectionStateChange.subscribe((state) => {
      if (state !== 'connected') return;
      if (timer) clearTimeout(timer);
      timer = null;
      source?.requestKeyFrame(pending?.layer ?? current);
    });
    closed.on(() => {
      if (timer) clearTimeout(timer);
      timer = null;
      stopCurrent?.();
      pending?.stop();
    });
    const transport: SubscribeTransport = {
      offer: pc.localDescription!.sdp,
      get layer() {
        return current;
      },
      accept: async (answer) => {
        // werift parses an answer before it looks at its state: a repeated one cost a parse each,
        // and answers sent together all found the state unchanged (so: one at a time, and none once one took)
        if (answering || pc.signalingState !== 'have-local-offer') throw new Error('this subscription has been answered already');
        answering = true;
        try {
          await pc.setRemoteDescription({ type: 'answer', sdp: remoteSdp(answer) });
        } finally {
          answering = false;
        }
      },
      attach: (s, layer) => {
        stopCurrent?.();
        source = s;
        current = layer;
        stopCurrent = s.onPacket(layer, send);
        // a key frame sent before the subscriber's transport connects would be lost
        if (pc.connectionState === 'connected') s.requestKeyFrame(layer);
      },
      switchLayer: (layer) => {
        const s = source;
        if (!s) return;
        pending?.stop();
        pending = null;
        if (layer === current) return;
        // the old layer keeps flowing until the new one starts a key frame: no undecodable gap
        const stop = s.onPacket(layer, (p) => {
          if (!isVp8KeyFrameStart((p as RtpPacket).payload)) return;
          stop();
          pending = null;
          stopCurrent?.();
          current = layer;
          sender.replaceRTP((p as RtpPacket).header, true);
          stopCurrent = s.onPacket(layer, send);
          send(p);
        });
        pending = { layer, stop };
        s.requestKeyFrame(layer);
      },
      onClosed: closed.on,
      stats: () => ({ ...counters }),
      close: () => {
        if (timer) clearTimeout(timer);
        timer = null;
        stopCurrent?.();
        pending?.stop();
        this.closePeer(pc);
      },
    };
    return transport;
  }
}

/** Listeners called once when `pc` fails or closes (or when `fire` says it is over). */
function watchClosed(pc: RTCPeerConnection): { on: (listener: () => void) => void; fire: () => void } {
  const listeners: Array<() => void> = [];
  let done = false;
  const fire = () => {
    if (done) return;
    done = true;
    for (const l of listeners) l();
  };
  pc.connectionStateChange.subscribe((state) => {
    if (state === 'failed' || state === 'closed') fire();
    // werift keeps the connection 'connected' when its DTLS transport closes under it (an alert):
    // the media has stopped all the same, and the member is told so that it negotiates again
    if (state === 'connected') for (const dtls of pc.dtlsTransports) dtls.onStateChange.subscribe((s) => (s === 'closed' || s === 'failed') && fire());
  });
  return { on: (l) => void listeners.push(l), fire };
}
