import { createHook } from 'node:async_hooks';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { MediaStreamTrack as WeriftTrack } from 'werift';
import { createPolyfillRTCPeerConnection } from 'werift/polyfill';
import type { MediaEngine, PublishTransport } from '../relay/media/engine.ts';
import type { WeriftEngine } from '../relay/media/werift-engine.ts';
import type { MediaPlatform } from '../src/media/platform.ts';
import { fakeTrack } from './media-helpers.ts';

/**
 * What the concurrency tests of media need besides `media-helpers.ts`: a platform that counts
 * the SDK's open peer connections and captures fake devices, packet watches on received tracks,
 * and an engine that can break a publication on purpose.
 */

interface IceConnection {
  consentExpiryTimer?: unknown;
  stopConsentLifecycle(): void;
}

/** werift's polyfill, counting peer connections made and not closed; `getUserMedia` captures a fake device. */
export function countingPlatform(): MediaPlatform & { open: () => number; stopAll: () => void } {
  const Base = createPolyfillRTCPeerConnection({ iceServers: [], iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'] });
  const open = new Set<object>();
  const fakes: Array<() => void> = [];
  class Counted extends Base {
    private readonly ice = new Set<IceConnection>();
    constructor(config?: ConstructorParameters<typeof Base>[0]) {
      super(config);
      open.add(this);
      this.iceConnectionStateChange.subscribe(() => this.noteIce());
      this.iceGatheringStateChange.subscribe(() => this.noteIce());
      this.connectionStateChange.subscribe(() => this.noteIce());
    }
    /** Its ICE connections, noted while they exist (a closed peer connection lists none). */
    private noteIce(): void {
      for (const t of (this as unknown as { iceTransports: Array<{ connection: IceConnection }> }).iceTransports) this.ice.add(t.connection);
    }
    override async close(): Promise<void> {
      open.delete(this);
      this.noteIce();
      const ice = [...this.ice];
      await super.close();
      // werift 0.25.2 as a full ICE agent (the relay is ICE-lite, unaffected): a connection closed
      // just as its checks complete starts its 30 s consent timer after close (connect() resumes
      // and calls queryConsent); harmless, but it keeps Node alive for 30 s after a test
      const sweep = () => ice.forEach((c) => c.consentExpiryTimer !== undefined && c.stopConsentLifecycle());
      for (const ms of [0, 50, 500, 2000]) setTimeout(sweep, ms).unref();
    }
  }
  const device = (kind: 'video' | 'audio') => {
    const f = fakeTrack(kind);
    const track = f.track as unknown as WeriftTrack;
    // the SDK stops a track it captured: the fake device stops with it
    const stop = track.stop.bind(track);
    track.stop = () => {
      f.stop();
      stop();
    };
    fakes.push(f.stop);
    return { getTracks: () => [f.track] } as unknown as MediaStream;
  };
  return {
    RTCPeerConnection: Counted as unknown as typeof RTCPeerConnection,
    getUserMedia: async (c) => device(c.video ? 'video' : 'audio'),
    getDisplayMedia: async () => device('video'),
    open: () => open.size,
    stopAll: () => fakes.forEach((s) => s()),
  };
}

const watched = new WeakMap<object, { packets: number; last: number }>();

/** Packets received on a (werift) track so far, and when the last one came; watched from the first call. */
export function reception(track: MediaStreamTrack): { packets: number; last: number } {
  let seen = watched.get(track);
  if (!seen) {
    const s = { packets: 0, last: 0 };
    seen = s;
    watched.set(track, s);
    (track as unknown as WeriftTrack).onReceiveRtp.subscribe(() => {
      s.packets++;
      s.last = Date.now();
    });
  }
  return seen;
}

/**
 * The relay's engine, with publications that can be broken on purpose: `unreachable` makes the
 * next publication's answer point to a port nobody listens on (its transport never connects).
 */
export class TestEngine implements MediaEngine {
  unreachable = 0;
  readonly transports: PublishTransport[] = [];
  constructor(readonly inner: WeriftEngine) {}

  async publish(...args: Parameters<MediaEngine['publish']>): Promise<PublishTransport> {
    const transport = await this.inner.publish(...args);
    this.transports.push(transport);
    if (this.unreachable <= 0) return transport;
    this.unreachable--;
    // every candidate's port becomes 9 (discard): the client's ICE checks reach nobody
    const answer = transport.answer.replace(/^(a=candidate:\S+ \d+ udp \d+ \S+ )\d+/gim, '$19');
    return { ...transport, answer, track: transport.track };
  }

  subscribe(...args: Parameters<MediaEngine['subscribe']>) {
    return this.inner.subscribe(...args);
  }

  record(...args: Parameters<MediaEngine['record']>) {
    return this.inner.record(...args);
  }
}

/** Active handles of a kind (`Timeout`, `UDPSocketWrap`...), for leak checks around a test. */
export function activeResources(): Map<string, number> {
  const out = new Map<string, number>();
  for (const name of process.getActiveResourcesInfo()) out.set(name, (out.get(name) ?? 0) + 1);
  return out;
}

/**
 * Timers (timeouts and intervals) created directly by the code under `dirs` (paths inside the
 * repository, e.g. `src/`, `relay/media/`) and still pending: a leak check that werift's own
 * timers cannot blur. Call `stop()` when done.
 */
export function ownTimers(dirs: string[]): { pending(): string[]; stop(): void } {
  const root = new URL('..', import.meta.url).pathname;
  const wanted = dirs.map((d) => root + d);
  const live = new Map<number, { resource: { _destroyed?: boolean; _idleTimeout?: number }; where: string }>();
  const hook = createHook({
    init(id, type, _trigger, resource) {
      if (type !== 'Timeout') return;
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 8;
      const stack = new Error().stack ?? '';
      Error.stackTraceLimit = limit;
      // the first frame outside Node's internals is the code that asked for the timer
      const caller = stack.split('\n').find((l) => l.includes('file://') || l.includes(root));
      if (caller && wanted.some((w) => caller.includes(w)) && !caller.includes('node_modules')) live.set(id, { resource: resource as never, where: caller.trim() });
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  return {
    pending: () => [...live.values()].filter((t) => !t.resource._destroyed && (t.resource._idleTimeout ?? 0) > 0).map((t) => t.where),
    stop: () => hook.disable(),
  };
}

/**
 * Let `timers/promises` delays stop holding the process open at exit (they still run while a
 * test does). werift 0.25.2 awaits such delays to retransmit a DTLS flight and never checks
 * whether its transport was closed meanwhile (`Flight.transmit`), so a transport closed in the
 * middle of its handshake — a publication unpublished as it starts, a subscription to it — keeps
 * Node alive for up to ~30 s after the last test. Our own timers are checked by `ownTimers`.
 */
export function unrefLibraryDelays(): void {
  const promises = createRequire(import.meta.url)('node:timers/promises') as { setTimeout: (ms?: number, value?: unknown, options?: { ref?: boolean }) => Promise<unknown>; unrefPatched?: boolean };
  if (promises.unrefPatched) return;
  const delay = promises.setTimeout;
  promises.setTimeout = (ms, value, options) => delay(ms, value, { ref: false, ...options });
  promises.unrefPatched = true;
  syncBuiltinESMExports();
}
