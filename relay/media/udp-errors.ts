import { createSocket, type Socket } from 'node:dgram';
import { UdpTransport } from 'werift';

/**
 * werift (0.25) makes each transport's UDP socket with a listener for its packets only. A socket
 * without an `'error'` listener that emits one ends the process: a bind that fails (`--media-ip`
 * not, or no longer, an address of this host: a member's `media.publish` then ended every room),
 * or a send that fails without a callback (werift sends to IP addresses that way). Each socket
 * now has one: a failed bind rejects the transport's start (the negotiation fails with its
 * reason), and a later error is a lost datagram, which UDP allows.
 */
const installed = Symbol('tessera.udpErrors');

interface WeriftUdp {
  socket: Socket;
  init(): Promise<void>;
}

/** Install on werift's UDP transport (once per process). Throws if werift no longer has what it wraps. */
export function installUdpErrorHandling(): void {
  const proto = UdpTransport.prototype as unknown as WeriftUdp & { [installed]?: true };
  if (proto[installed]) return;
  const init = proto.init;
  if (typeof init !== 'function') throw new Error("werift's UdpTransport no longer has init(): the UDP error handling cannot be installed");
  proto.init = async function (this: WeriftUdp): Promise<void> {
    const socket = this.socket;
    let bindFailed: ((error: Error) => void) | null = null;
    socket.on('error', (error) => bindFailed?.(error));
    const failed = new Promise<never>((_, reject) => (bindFailed = reject));
    try {
      await Promise.race([init.call(this), failed]);
    } catch (error) {
      try {
        socket.close();
      } catch {
        // not bound: nothing to close
      }
      throw error;
    } finally {
      bindFailed = null;
    }
  };
  proto[installed] = true;
}

/**
 * Check that media can be received on `ip` (a UDP socket binds to it), before the relay starts:
 * else every publish and subscribe would fail, each with no more than a `media-failed`.
 */
export async function checkMediaIp(ip: string): Promise<void> {
  const socket = createSocket(ip.includes(':') ? 'udp6' : 'udp4');
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind({ address: ip, port: 0 }, () => resolve());
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new Error(`--media-ip ${ip} is not an address of this host (${code}): the relay receives media on it, so it must be one of this host's own addresses`);
  } finally {
    try {
      socket.close();
    } catch {
      // never bound
    }
  }
}
