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
import { MediaRecorder } from 'werift/nonstandard';
import type { MediaEngine, PublishTransport, SubscribeTransport, TrackRecorder, TrackSource, TransportStats } from './engine.ts';
import { isVp8KeyFrameStart } from './vp8.ts';

const KEY_FRAME_INTERVAL_MS = 300;
const CONNECT_TIMEOUT_MS = 15_000;

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
}

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

class Source implements TrackSource {
  private readonly layers = new Map<string, Layer>();

  constructor(
    readonly kind: TrackKind,
    private readonly pli: (ssrc: number) => void,
    private readonly counters: TransportStats,
  ) {}

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

  deliver(rid: string, packet: RtpPacket): void {
    this.counters.packets++;
    this.counters.bytes += packet.payload.length;
    const layer = this.layer(rid);
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
    for (const layer of this.layers.values()) if (layer.deferred) clearTimeout(layer.deferred);
  }

  requestKeyFrame(rid: string): void {
    if (this.kind !== 'video') return;
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

/** The werift implementation of the media engine: one peer connection per transport, ICE lite. */
export class WeriftEngine implements MediaEngine {
  constructor(private readonly options: WeriftOptions) {}

  private peer(): RTCPeerConnection {
    const ip = this.options.mediaIp;
    return new RTCPeerConnection({
      iceLite: true,
      iceServers: [],
      iceUseIpv6: false,
      iceInterfaceAddresses: { udp4: ip },
      iceAdditionalHostAddresses: ip.startsWith('127.') ? [ip] : [],
      codecs: codecs(),
      headerExtensions: { video: [useSdesMid(), useSdesRTPStreamId(), useRepairedRtpStreamId()], audio: [useSdesMid()] },
    });
  }

  async publish(kind: TrackKind, offer: string): Promise<PublishTransport> {
    const pc = this.peer();
    const counters = zero();
    const closed = watchClosed(pc);
    let remb: ReturnType<typeof setInterval> | null = null;
    closed.on(() => remb && clearInterval(remb));
    const track = new Promise<TrackSource>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no media arrived')), CONNECT_TIMEOUT_MS);
      let source: Source | null = null;
      const wired = new Set<MediaStreamTrack>();
      // werift announces a transceiver once; its receiver holds one track per simulcast layer (by rid)
      pc.onTrack.subscribe((t) => {
        clearTimeout(timer);
        const transceiver = pc.getTransceivers().find((tr) => tr.receiver.tracks.includes(t) || tr.receiver.track === t);
        if (!source) {
          const created = new Source(kind, (ssrc) => void transceiver?.receiver.sendRtcpPLI(ssrc), counters);
          source = created;
          transceiver?.receiver.onPacketLost.subscribe(() => counters.nacks++);
          if (kind === 'video' && transceiver) {
            const receiver = transceiver.receiver;
            remb = setInterval(() => {
              const ssrcs = created.ssrcs();
              if (ssrcs.length) sendRemb(receiver, ssrcs, this.options.maxVideoBitrate ?? 2_500_000);
            }, REMB_INTERVAL_MS);
          }
          resolve(source);
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
    });
    track.catch(() => undefined);
    await pc.setRemoteDescription({ type: 'offer', sdp: offer });
    const answer = await pc.createAnswer();
    await pc.setLocalDescription(answer);
    return {
      answer: pc.localDescription!.sdp,
      track,
      onClosed: closed.on,
      stats: () => ({ ...counters }),
      close: () => {
        if (remb) clearInterval(remb);
        void track.then((t) => (t as Source).dispose(), () => undefined);
        void pc.close();
      },
    };
  }

  async record(source: TrackSource, layer: string, path: string): Promise<TrackRecorder> {
    const codec = source.kind === 'video' ? codecs().video[0]! : codecs().audio[0]!;
    const track = new MediaStreamTrack({ kind: source.kind, codec });
    // one track per file: nothing to synchronise with, timing from RTP timestamps alone
    const recorder = new MediaRecorder({ path, tracks: [track], numOfTracks: 1, disableLipSync: true, disableNtp: true });
    const off = source.onPacket(layer, (p) => track.writeRtp(p as RtpPacket));
    // a recording starts at a key frame
    source.requestKeyFrame(layer);
    return {
      stop: async () => {
        off();
        await recorder.stop();
      },
    };
  }

  async subscribe(kind: TrackKind): Promise<SubscribeTransport> {
    const pc = this.peer();
    const counters = zero();
    const closed = watchClosed(pc);
    const transceiver = pc.addTransceiver(new MediaStreamTrack({ kind }), { direction: 'sendonly' });
    const sender = transceiver.sender;
    await pc.setLocalDescription(await pc.createOffer());
    let source: TrackSource | null = null;
    let current = '';
    let stopCurrent: (() => void) | null = null;
    let pending: { layer: string; stop: () => void } | null = null;
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
      if (state === 'connected') source?.requestKeyFrame(pending?.layer ?? current);
    });
    const transport: SubscribeTransport = {
      offer: pc.localDescription!.sdp,
      get layer() {
        return current;
      },
      accept: async (answer) => {
        await pc.setRemoteDescription({ type: 'answer', sdp: answer });
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
        stopCurrent?.();
        pending?.stop();
        void pc.close();
      },
    };
    return transport;
  }
}

function watchClosed(pc: RTCPeerConnection): { on: (listener: () => void) => void } {
  const listeners: Array<() => void> = [];
  let done = false;
  pc.connectionStateChange.subscribe((state) => {
    if (done || (state !== 'failed' && state !== 'closed')) return;
    done = true;
    for (const l of listeners) l();
  });
  return { on: (l) => void listeners.push(l) };
}
