/**
 * The room's tracks as ffmpeg reads them: each track's RTP, as forwarded by the SFU, sent to a
 * loopback UDP port of its own, and one SDP that names them all (VP8 video first, then Opus
 * audio: the order `composite.ts` expects). Payload types are rewritten to the SDP's; nothing
 * is decoded or re-encoded here.
 */
import { createSocket, type Socket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import type { TrackKind } from '../../../src/protocol/media.ts';

/** What a feed needs of a track (a `TappedTrack` of the media board). */
export interface FeedTrack {
  readonly kind: TrackKind;
  rtp(listener: (rtp: Buffer) => void): () => void;
  requestKeyFrame(): void;
}

const PAYLOAD_TYPE: Record<TrackKind, number> = { video: 96, audio: 111 };
const RTPMAP: Record<TrackKind, string> = { video: 'VP8/90000', audio: 'opus/48000/2' };

/** Key frames asked for after the feed starts: ffmpeg decodes nothing of a video before one. */
const KEY_FRAME_ASKS_MS = [0, 500, 1500];

/**
 * The lowest port the kernel hands out to `bind(0)` (Linux: `net.ipv4.ip_local_port_range`).
 * RTP ports are taken below it: a port found free there is not given to the next socket that
 * binds port 0 (werift opens one per peer connection) before ffmpeg binds it.
 */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'latin1').trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > 2048) return low;
  } catch {
    // not Linux: the usual IANA range
  }
  return 49152;
}

/** Ports handed out recently, until when: two runs starting together never get the same. */
const handedOut = new Map<number, number>();
const HOLD_MS = 30_000;

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    socket.once('error', () => {
      socket.close();
      resolve(false);
    });
    socket.bind(port, '127.0.0.1', () => socket.close(() => resolve(true)));
  });
}

/**
 * Free even UDP ports on loopback for ffmpeg: RTP on p and RTCP on p + 1 (ffmpeg binds both),
 * from the ports below the kernel's ephemeral range, each checked free and held back from the
 * next callers for a while.
 */
export async function freeRtpPorts(n: number): Promise<number[]> {
  const top = ephemeralLow() - 2;
  const bottom = Math.max(1024, top - 16_000);
  const now = Date.now();
  for (const [port, until] of handedOut) if (until < now) handedOut.delete(port);
  const ports: number[] = [];
  for (let tries = 0; ports.length < n && tries < n * 50 + 50; tries++) {
    const port = bottom + 2 * Math.floor(Math.random() * ((top - bottom) / 2));
    if (handedOut.has(port) || ports.includes(port)) continue;
    if (!(await bindable(port)) || !(await bindable(port + 1))) continue;
    handedOut.set(port, now + HOLD_MS);
    ports.push(port);
  }
  if (ports.length < n) throw new Error('no free UDP ports on loopback');
  return ports;
}

/**
 * ffmpeg's arguments to read an SDP of {@link feedSdp} (then `-i` it). Its RTP and RTCP sockets
 * are bound to loopback: left to itself ffmpeg binds every interface and takes packets from any
 * source, so anyone on the network, no token, could feed a room's output (2,000 packets a second
 * to a predictable port froze a room's HLS for good).
 */
export const FEED_INPUT: readonly string[] = ['-protocol_whitelist', 'file,udp,rtp', '-localaddr', '127.0.0.1'];

/** The SDP of a set of tracks on their ports. */
export function feedSdp(tracks: ReadonlyArray<{ kind: TrackKind; port: number }>): string {
  const lines = ['v=0', 'o=- 0 0 IN IP4 127.0.0.1', 's=tessera', 'c=IN IP4 127.0.0.1', 't=0 0'];
  for (const { kind, port } of tracks) lines.push(`m=${kind} ${port} RTP/AVP ${PAYLOAD_TYPE[kind]}`, `a=rtpmap:${PAYLOAD_TYPE[kind]} ${RTPMAP[kind]}`);
  return `${lines.join('\n')}\n`;
}

/**
 * Sends the packets of some tracks to their ports until stopped. Packets sent before ffmpeg
 * listens are lost, which costs nothing but the key frames asked for again.
 */
export class RtpFeed {
  private readonly socket: Socket = createSocket('udp4');
  private readonly offs: Array<() => void> = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private stopped = false;
  /** Packets sent, per track (for tests and metrics). */
  readonly sent: number[];

  constructor(tracks: ReadonlyArray<{ track: FeedTrack; port: number }>) {
    // a loopback datagram cannot fail in a way that matters; an error must not end the relay
    this.socket.on('error', () => undefined);
    this.sent = tracks.map(() => 0);
    tracks.forEach(({ track, port }, i) => {
      const pt = PAYLOAD_TYPE[track.kind];
      this.offs.push(
        track.rtp((rtp) => {
          if (this.stopped || rtp.length < 12) return;
          // the marker bit stays, the payload type becomes the SDP's
          const out = Buffer.from(rtp);
          out[1] = (out[1]! & 0x80) | pt;
          this.socket.send(out, port, '127.0.0.1');
          this.sent[i]!++;
        }),
      );
      if (track.kind === 'video') for (const ms of KEY_FRAME_ASKS_MS) this.timers.push(setTimeout(() => track.requestKeyFrame(), ms));
    });
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const off of this.offs.splice(0)) off();
    for (const timer of this.timers.splice(0)) clearTimeout(timer);
    this.socket.close();
  }
}
