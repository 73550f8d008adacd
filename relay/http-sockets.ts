import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { shareKey } from './send-file.ts';

/** Plain HTTP sockets (not upgraded) the relay keeps open at once, beside the members'. */
export const HTTP_SOCKETS = 1024;

/** Why a plain HTTP socket was refused: every place taken, or its address's share. */
export type SocketRefusal = 'http-sockets' | 'http-sockets-per-address';

/**
 * The places of sockets that made a plain HTTP request (not an upgrade): at most
 * {@link HTTP_SOCKETS} in all, and at most `perAddress` for one client address (an IPv6 /64),
 * so that neither kept-alive HTTP sockets can take the members' places, nor one address every
 * other client's HTTP side (downloads, the server API, health checks). A request a cluster peer
 * proves it sent (`isPeer`) is never refused its address's share: a node passes on many
 * clients' downloads.
 */
export class PlainSockets {
  private readonly open = new Set<Socket>();
  private readonly byAddress = new Map<string, number>();

  constructor(
    private readonly perAddress: number,
    private readonly isPeer: (req: IncomingMessage) => boolean,
  ) {}

  get size(): number {
    return this.open.size;
  }

  /** Take a place for the socket of `req` (a socket keeps the place it has); null, or why not. */
  admit(req: IncomingMessage): SocketRefusal | null {
    const socket = req.socket;
    if (this.open.has(socket)) return null;
    if (this.open.size >= HTTP_SOCKETS) return 'http-sockets';
    const key = shareKey(socket.remoteAddress, false) ?? '';
    const held = this.byAddress.get(key) ?? 0;
    if (this.perAddress > 0 && held >= this.perAddress && !this.isPeer(req)) return 'http-sockets-per-address';
    this.open.add(socket);
    this.byAddress.set(key, held + 1);
    socket.once('close', () => {
      this.open.delete(socket);
      const left = (this.byAddress.get(key) ?? 1) - 1;
      if (left > 0) this.byAddress.set(key, left);
      else this.byAddress.delete(key);
    });
    return null;
  }
}
