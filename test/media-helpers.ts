import { MediaStreamTrack as WeriftTrack, RtpHeader, RtpPacket } from 'werift';
import { createPolyfillRTCPeerConnection } from 'werift/polyfill';
import type { MediaPlatform } from '../src/media/platform.ts';

/** werift's browser-compatible RTCPeerConnection: the SDK's media code runs unchanged in Node. */
export const nodePlatform: MediaPlatform = {
  RTCPeerConnection: createPolyfillRTCPeerConnection({ iceServers: [], iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'] }) as unknown as typeof RTCPeerConnection,
  getUserMedia: () => Promise.reject(new Error('no devices in Node: pass a track')),
  getDisplayMedia: () => Promise.reject(new Error('no screen in Node: pass a track')),
};

/** A track that emits RTP like a camera (VP8 key frames every `keyEvery` frames) or a microphone. */
export function fakeTrack(kind: 'video' | 'audio', keyEvery = 30, lose: (seq: number) => boolean = () => false): { track: MediaStreamTrack; stop(): void; sent: () => number } {
  const track = new WeriftTrack({ kind });
  let seq = 1;
  let frame = 0;
  const timer = setInterval(() => {
    // a lost packet: its sequence number is used, the packet never leaves
    if (lose(seq)) {
      seq++;
      frame++;
      return;
    }
    const key = frame % keyEvery === 0;
    // VP8 payload descriptor (S bit) + a 3-byte frame tag whose lowest bit is 0 on key frames
    const payload = kind === 'video' ? Buffer.from([0x10, key ? 0x00 : 0x01, 0x00, 0x00, 0x9d, 0x01, 0x2a, frame & 0xff]) : Buffer.from([0xf8, 0xff, 0xfe]);
    track.writeRtp(new RtpPacket(new RtpHeader({ payloadType: kind === 'video' ? 96 : 111, sequenceNumber: seq++ & 0xffff, timestamp: (frame * (kind === 'video' ? 3000 : 960)) >>> 0, ssrc: 4242, marker: true }), payload));
    frame++;
  }, 20);
  return { track: track as unknown as MediaStreamTrack, stop: () => clearInterval(timer), sent: () => frame };
}

/** Count RTP packets arriving on a received (werift) track. */
export function countPackets(track: MediaStreamTrack): () => number {
  let n = 0;
  (track as unknown as WeriftTrack).onReceiveRtp.subscribe(() => n++);
  return () => n;
}
