import { MediaStreamTrack, RTCPeerConnection, RTCRtpCodecParameters, type RtpPacket, useSdesMid } from 'werift';
import type { TrackKind } from '../../src/protocol/media.ts';
import type { MediaEngine, PublishTransport, SubscribeTransport, TrackSource, TransportStats } from './engine.ts';

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
}

const zero = (): TransportStats => ({ packets: 0, bytes: 0, nacks: 0, keyFrameRequests: 0 });

class Source implements TrackSource {
  private readonly listeners = new Set<(packet: RtpPacket) => void>();
  private lastKeyFrameRequest = 0;

  constructor(
    readonly kind: TrackKind,
    private readonly pli: () => void,
    private readonly counters: TransportStats,
  ) {}

  onPacket(listener: (packet: object) => void): () => void {
    this.listeners.add(listener as (packet: RtpPacket) => void);
    return () => this.listeners.delete(listener as (packet: RtpPacket) => void);
  }

  deliver(packet: RtpPacket): void {
    this.counters.packets++;
    this.counters.bytes += packet.payload.length;
    for (const listener of this.listeners) listener(packet);
  }

  requestKeyFrame(): void {
    if (this.kind !== 'video') return;
    const now = Date.now();
    if (now - this.lastKeyFrameRequest < KEY_FRAME_INTERVAL_MS) return;
    this.lastKeyFrameRequest = now;
    this.counters.keyFrameRequests++;
    this.pli();
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
      headerExtensions: { video: [useSdesMid()], audio: [useSdesMid()] },
    });
  }

  async publish(kind: TrackKind, offer: string): Promise<PublishTransport> {
    const pc = this.peer();
    const counters = zero();
    const closed = watchClosed(pc);
    const track = new Promise<TrackSource>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no media arrived')), CONNECT_TIMEOUT_MS);
      pc.onTrack.subscribe((t) => {
        clearTimeout(timer);
        const transceiver = pc.getTransceivers().find((tr) => tr.receiver.tracks.includes(t));
        const source = new Source(kind, () => void transceiver?.receiver.sendRtcpPLI(t.ssrc ?? 0), counters);
        t.onReceiveRtp.subscribe((packet) => source.deliver(packet));
        transceiver?.receiver.onPacketLost.subscribe(() => counters.nacks++);
        resolve(source);
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
      close: () => void pc.close(),
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
    let stop: (() => void) | null = null;
    sender.onPictureLossIndication.subscribe(() => source?.requestKeyFrame());
    sender.onGenericNack.subscribe(() => counters.nacks++);
    const connected = new Promise<void>((resolve) =>
      pc.connectionStateChange.subscribe((state) => {
        if (state === 'connected') resolve();
      }),
    );
    void connected.then(() => source?.requestKeyFrame());
    return {
      offer: pc.localDescription!.sdp,
      accept: async (answer) => {
        await pc.setRemoteDescription({ type: 'answer', sdp: answer });
      },
      attach: (s) => {
        stop?.();
        source = s;
        stop = s.onPacket((p) => {
          const packet = (p as RtpPacket).clone();
          // the publisher's header extensions mean nothing on this transport: werift writes its own
          packet.header.extensions = [];
          counters.packets++;
          counters.bytes += packet.payload.length;
          void sender.sendRtp(packet).catch(() => undefined);
        });
        s.requestKeyFrame();
      },
      onClosed: closed.on,
      stats: () => ({ ...counters }),
      close: () => {
        stop?.();
        void pc.close();
      },
    };
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
