/**
 * A member whose connection is on one node and whose room is homed on another: at the home,
 * a `RemoteLink` stands for its connection; at its node, a `RemotePort` stands for its room.
 * Both only forward, through the {@link NodeBus}.
 */
import type { RequestFrame, ServerFrame } from '../../src/protocol/messages.ts';
import { rawPayloadOf, withoutPayload } from '../data/raw-json.ts';
import type { Answerer } from '../dispatch.ts';
import type { MemberConnection, PortMember, RoomPort } from '../seam.ts';
import type { NodeBus } from './bus.ts';
import { TokenBucket } from '../data/token-bucket.ts';
import type { InputWindows } from './input-window.ts';

/** At the room's home: the connection of a member on node `edge`, known there as `link`. */
export class RemoteLink implements MemberConnection {
  /**
   * Unsent bytes, as the member's node last reported them: it reports a connection that a stream
   * fills past the high-water mark, and again once it has drained, so that the home holds the
   * stream's acknowledgements back as for a member of its own (its node still drops optional
   * traffic and cuts past the hard cap, as for any connection).
   */
  bufferedAmount = 0;
  private closed = false;
  /** The member leaves the room once its link is closed from here (removal, end, takeover). */
  onClose: () => void = () => undefined;

  constructor(
    private readonly bus: NodeBus,
    readonly edge: string,
    readonly link: string,
  ) {}

  send(frame: ServerFrame): void {
    this.sendRaw(Buffer.from(JSON.stringify(frame)));
  }

  sendRaw(data: Buffer, optional = false, lazy = false): void {
    if (this.closed) return;
    const header: { t: 'frame'; link: string; o?: 1; l?: 1 } = { t: 'frame', link: this.link };
    if (optional) header.o = 1;
    if (lazy) header.l = 1;
    this.bus.send(this.edge, header, data);
  }

  sendBinary(data: Uint8Array): void {
    if (this.closed) return;
    this.bus.send(this.edge, { t: 'frame', link: this.link, b: 1 }, data);
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.bus.send(this.edge, { t: 'close', link: this.link, code, reason });
    this.onClose();
  }

  replaced(): void {
    if (this.closed) return;
    this.closed = true;
    this.bus.send(this.edge, { t: 'replaced', link: this.link });
    this.onReplaced();
  }

  /** The member is spoken for by another connection now (a resume): forget this one. */
  onReplaced: () => void = () => undefined;

  flooded(): void {
    this.bus.send(this.edge, { t: 'flooded', link: this.link });
  }

  drop(): void {
    this.bus.send(this.edge, { t: 'drop', link: this.link });
  }
}

/** At the member's node: its room, homed on node `home`, where it is known as `link`. */
export class RemotePort implements RoomPort {
  /**
   * @param binary what the binary frames of the member's token may cost here before they reach
   *   the home (its fan-out budget's rate and burst, shared by the token's members on this node):
   *   every chunk crosses Redis, so the member's node charges it before reading more, as the home
   *   charges what it forwards
   * @param windows what this node's members have sent their homes that the homes have not taken
   *   yet: past its token's or its home's window, the member's binary frames wait
   */
  constructor(
    private readonly bus: NodeBus,
    private readonly home: string,
    private readonly link: string,
    readonly roomId: string,
    readonly member: PortMember,
    private readonly forget: () => void,
    private readonly binary: TokenBucket,
    private readonly windows: InputWindows,
  ) {}

  request(request: RequestFrame, _out: Answerer): Promise<void> {
    // answered by the home through the member's link, like every frame it sends. A payload of bytes
    // (see publish-cut.ts) travels as the message's bytes, not parsed to be encoded again: copied,
    // as the bus sends once this turn is over, after the frame's bytes were given back
    const raw = rawPayloadOf(request);
    if (raw) this.bus.send(this.home, { t: 'req', link: this.link, request: withoutPayload(request), raw: true }, Buffer.from(raw.json));
    else this.bus.send(this.home, { t: 'req', link: this.link, request });
    return Promise.resolve();
  }

  chunk(frame: Buffer): void {
    this.binary.spend(frame.length);
    this.windows.sent(this.home, this.member.tokenKey, frame.length);
    // the home says when it has taken it, by token (`taken`)
    this.bus.send(this.home, { t: 'chunk', link: this.link, k: this.member.tokenKey }, frame);
  }

  owes(): number {
    return Math.max(this.binary.msUntilToken(0), this.windows.waitMs(this.home, this.member.tokenKey));
  }

  leave(): void {
    this.forget();
    this.bus.send(this.home, { t: 'leave', link: this.link });
  }

  hold(): boolean {
    this.forget();
    this.bus.send(this.home, { t: 'hold', link: this.link });
    return true;
  }
}
