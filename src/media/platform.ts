import { SdkError } from '../errors.ts';

/**
 * The WebRTC a room uses: the browser's by default. Injected in Node (bots, tests) — e.g. from
 * werift's polyfill — so that the SDK's media code runs unchanged there.
 */
export interface MediaPlatform {
  /** The peer connection class. */
  RTCPeerConnection: typeof RTCPeerConnection;
  /** Capture a camera or a microphone (`publish('camera' | 'microphone')` without a track). */
  getUserMedia(constraints: MediaStreamConstraints): Promise<MediaStream>;
  /** Capture the screen (`publish('screen')` without a track). */
  getDisplayMedia(constraints: DisplayMediaStreamOptions): Promise<MediaStream>;
}

/** The browser's WebRTC, looked up only when media is first used (never at import). */
export function browserPlatform(): MediaPlatform {
  const g = globalThis as { RTCPeerConnection?: typeof RTCPeerConnection; navigator?: Navigator };
  if (typeof g.RTCPeerConnection !== 'function') {
    throw new SdkError('INVALID_ARGUMENT', 'no WebRTC here: pass a media platform in the join options (Node) or use a browser', { reason: 'no-webrtc' });
  }
  const devices = g.navigator?.mediaDevices;
  return {
    RTCPeerConnection: g.RTCPeerConnection,
    getUserMedia: (c) => {
      if (!devices?.getUserMedia) return Promise.reject(new SdkError('INVALID_ARGUMENT', 'getUserMedia is not available here', { reason: 'no-devices' }));
      return devices.getUserMedia(c);
    },
    getDisplayMedia: (c) => {
      if (!devices?.getDisplayMedia) return Promise.reject(new SdkError('INVALID_ARGUMENT', 'screen capture is not available here', { reason: 'no-display-capture' }));
      return devices.getDisplayMedia(c);
    },
  };
}

/**
 * A new peer connection of `platform`, or a typed error: a browser's constructor throws past its
 * limit of peer connections (about 500 in Chrome), and that error, a `DOMException`, must reach
 * the caller as the SDK's own (`CONNECTION_FAILED`, `media-transport-failed`).
 */
export function newPeerConnection(platform: () => MediaPlatform, what: string): RTCPeerConnection {
  const rtc = platform();
  try {
    return new rtc.RTCPeerConnection({ iceServers: [] });
  } catch (error) {
    throw new SdkError('CONNECTION_FAILED', `${what}: no peer connection could be made (${error instanceof Error ? error.message : String(error)})`, { reason: 'media-transport-failed' });
  }
}

/** Resolve once ICE gathering is complete: the relay is ICE-lite and takes candidates in the SDP. */
export function iceGathered(pc: RTCPeerConnection, timeoutMs = 3000): Promise<void> {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      pc.removeEventListener('icegatheringstatechange', check);
      resolve();
    };
    const check = () => {
      if (pc.iceGatheringState === 'complete') done();
    };
    const timer = setTimeout(done, timeoutMs);
    pc.addEventListener('icegatheringstatechange', check);
  });
}

/**
 * Resolve once `pc` is connected (ICE and DTLS done: media can flow between it and the relay).
 * Rejects with `CONNECTION_FAILED` (`media-not-connected`) when it fails, closes or takes longer
 * than `timeoutMs`, or with the error given to `abort` (the relay's verdict, a moderator's stop,
 * the session's end), whichever comes first. Listeners and the timer are removed either way.
 */
export function whenConnected(pc: RTCPeerConnection, what: string, timeoutMs: number): { done: Promise<void>; abort(error: Error): void } {
  let abort: (error: Error) => void = () => undefined;
  const done = new Promise<void>((resolve, reject) => {
    const finish = (error: Error | null) => {
      clearTimeout(timer);
      pc.removeEventListener('connectionstatechange', check);
      abort = () => undefined;
      if (error) reject(error);
      else resolve();
    };
    const check = () => {
      const state = pc.connectionState;
      if (state === 'connected') finish(null);
      else if (state === 'failed' || state === 'closed') finish(new SdkError('CONNECTION_FAILED', `${what}: the media connection to the relay ${state}`, { reason: 'media-not-connected' }));
    };
    const timer = setTimeout(() => finish(new SdkError('CONNECTION_FAILED', `${what}: the media connection to the relay did not come up within ${timeoutMs} ms`, { reason: 'media-not-connected' })), timeoutMs);
    abort = finish;
    pc.addEventListener('connectionstatechange', check);
    check();
  });
  done.catch(() => undefined);
  return { done, abort: (error) => abort(error) };
}
