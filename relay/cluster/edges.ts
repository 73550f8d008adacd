import type { JoinedFrame, WireError } from '../../src/protocol/messages.ts';
import type { RelayContext } from '../context.ts';
import { TokenBucket } from '../data/token-bucket.ts';
import type { LobbyJoiner, MemberConnection, PortMember, RoomPort } from '../seam.ts';
import { headerString as str, type Envelope, type NodeBus } from './bus.ts';
import { RemotePort } from './links.ts';
import { PressureWatch } from './pressure.ts';
import { InputWindows } from './input-window.ts';
import { presenceKey } from '../rooms/presence.ts';
import { BucketMap } from '../data/bucket-map.ts';
import { RecentMap } from '../recent-map.ts';

/** Links given up here lately whose home was told so (a home that seated one late hears it once). */
const GIVEN_UP_LINKS = 10_000;

/** At this node, for a room homed elsewhere: one of its connections, by link id. */
export interface Edge {
  readonly conn: MemberConnection;
  /** The node its room is homed on. */
  readonly home: string;
  /** Set while it waits in the room's lobby. */
  readonly joiner?: LobbyJoiner;
}

/** What a room's home says to a connection of this node: its messages, by type. */
type EdgeMessage = (from: string, envelope: Envelope) => void;

/**
 * The connections of this node whose rooms are homed on other nodes, each known to its home by
 * a link id: what the homes send them (frames, closes, lobby answers) is delivered here, and
 * when a home is gone (or Redis was away and what it sent was lost) they are dropped, so that
 * their clients resume where their rooms are now.
 */
export class ClusterEdges {
  private readonly edges = new Map<string, Edge>();
  private nextLink = 1;
  /** Connections here that a stream filled past the high-water mark, reported to their rooms' homes. */
  private readonly pressure: PressureWatch;
  /** Members' chunks their homes have not taken yet (see {@link InputWindows}). */
  readonly windows = new InputWindows();
  /**
   * What binary frames may cost before they reach their homes, per token (its project and
   * signature, as the scheduler's flows): a hundred members of one shared token, each with a
   * budget of its own, pushed 280 MiB/s of frames no stream took through Redis.
   */
  private readonly binary: BucketMap;
  private readonly messages: Record<string, EdgeMessage> = {
    taken: (from, { header: h }) => {
      if (typeof h.k === 'string' && typeof h.bytes === 'number' && h.bytes > 0) this.windows.taken(from, h.k, h.bytes);
    },
    frame: (from, envelope) => this.frame(from, envelope),
    close: (_from, { header: h }) => {
      const edge = this.take(h.link);
      edge?.conn.close(typeof h.code === 'number' ? h.code : 1011, str(h.reason) ?? '');
    },
    replaced: (_from, { header: h }) => this.take(h.link)?.conn.replaced?.(),
    flooded: (_from, { header: h }) => this.edges.get(str(h.link) ?? '')?.conn.flooded(),
    drop: (from, { header: h }) => {
      const id = str(h.link) ?? '';
      const edge = this.edges.get(id);
      if (edge) edge.conn.drop();
      else this.unknown(from, id);
    },
    admitted: (from, { header: h }) => {
      const id = str(h.link) ?? '';
      const edge = this.edges.get(id);
      const { joined, member } = h as { joined?: JoinedFrame; member?: PortMember };
      // admitted as its connection went, or after this node gave its wait up (the moderator's
      // node seated it already): it leaves there, told so whatever was said of the link before
      if (!edge?.joiner) return void (id !== '' && this.tellGone(from, id));
      if (!joined || !member) return;
      this.edges.set(id, { conn: edge.conn, home: edge.home });
      edge.joiner.admitted({ port: this.port(from, id, joined, member), joined });
    },
    'lobby-left': (_from, { header: h }) => {
      const id = str(h.link) ?? '';
      const edge = this.edges.get(id);
      if (!edge?.joiner) return;
      this.edges.delete(id);
      edge.joiner.leaveLobby(h.error as WireError);
    },
  };

  constructor(
    private readonly relay: RelayContext,
    private readonly bus: NodeBus,
  ) {
    this.binary = new BucketMap(() => new TokenBucket(relay.config.fanoutByteRate, relay.config.fanoutByteBurst));
    this.pressure = new PressureWatch(
      relay.config.streamHighWater,
      (home, link, bytes) => this.bus.send(home, { t: 'pressure', link, bytes }),
      (link) => this.edges.get(link),
    );
  }

  /** A connection here enters (or waits for) a room homed on `home`: its link id. */
  open(home: string, conn: MemberConnection, joiner?: LobbyJoiner): string {
    const id = `${this.nextLink++}`;
    this.edges.set(id, joiner ? { conn, home, joiner } : { conn, home });
    return id;
  }

  /** The link is given up (refused, cancelled, or its home did not answer). */
  close(link: string): void {
    this.edges.delete(link);
  }

  /**
   * The link is given up while its home may still seat it (its answer did not come in time, or
   * the wait was cancelled): the home is told, so that a member it seats late leaves there.
   */
  giveUp(home: string, link: string): void {
    this.edges.delete(link);
    this.tellGone(home, link);
  }

  /**
   * A home spoke to a link this node no longer has: the member it holds there has no connection
   * (it was seated as its connection went, or after this node gave up waiting): it leaves.
   */
  private unknown(home: string, link: string): void {
    if (link === '' || this.given.get(`${home}\u0000${link}`)) return;
    this.tellGone(home, link);
  }

  /**
   * A link dropped here: its connection's end tells its home (a hold for a resume, or a leave)
   * once the socket has closed, so what the home sends it meanwhile must not make it leave.
   */
  private dropped(id: string, edge: Edge): void {
    this.edges.delete(id);
    this.given.set(`${edge.home}\u0000${id}`, true);
  }

  private tellGone(home: string, link: string): void {
    this.given.set(`${home}\u0000${link}`, true);
    this.bus.send(home, { t: 'leave', link });
  }

  private readonly given = new RecentMap<string, true>(GIVEN_UP_LINKS);

  /** The port through which the member behind `link` acts in its room at `home`. */
  port(home: string, link: string, joined: JoinedFrame, member: PortMember): RoomPort {
    // not marked as given up when its port leaves or holds: that message may be lost with Redis,
    // and the home's `drop` after it comes back must then be answered (frames still on their way
    // get a `leave` the home ignores, for a guest it no longer has)
    return new RemotePort(this.bus, home, link, joined.roomId, member, () => this.edges.delete(link), this.binaryBudget(member), this.windows);
  }

  /** The binary budget of the member's token, shared by its members here. */
  private binaryBudget(member: PortMember): TokenBucket {
    return this.binary.get(presenceKey(member));
  }

  /** The nodes these connections' rooms are homed on. */
  homes(): Set<string> {
    return new Set([...this.edges.values()].map((edge) => edge.home));
  }

  /** Whether `type` is a message for this node's connections. */
  handles(type: unknown): boolean {
    return typeof type === 'string' && Object.hasOwn(this.messages, type);
  }

  /** A message from a room's home to one (or, for a frame, several) of these connections. */
  receive(from: string, envelope: Envelope): void {
    const type = envelope.header.t;
    if (this.handles(type)) this.messages[type as string]!(from, envelope);
  }

  /** Drop every connection (what their homes sent meanwhile was lost): their clients resume. */
  dropAll(): void {
    this.windows.clear();
    for (const [id, edge] of [...this.edges]) {
      this.dropped(id, edge);
      edge.conn.drop();
    }
  }

  /** Drop the connections whose rooms were homed on `dead` nodes; how many there were. */
  dropHomedOn(dead: ReadonlySet<string>): number {
    for (const home of dead) this.windows.forget(home);
    let dropped = 0;
    for (const [id, edge] of [...this.edges]) {
      if (!dead.has(edge.home)) continue;
      this.dropped(id, edge);
      edge.conn.drop();
      dropped++;
    }
    return dropped;
  }

  stop(): void {
    this.pressure.stop();
  }

  private take(link: unknown): Edge | undefined {
    const id = str(link) ?? '';
    const edge = this.edges.get(id);
    this.edges.delete(id);
    return edge;
  }

  private frame(from: string, { header: h, payload }: Envelope): void {
    if (!payload || !Array.isArray(h.links)) return;
    // one copy of the bytes for all its links, as a fan-out on a single relay shares one buffer
    const data = Buffer.from(payload);
    for (const link of h.links) {
      const id = str(link) ?? '';
      const edge = this.edges.get(id);
      if (!edge) {
        this.unknown(from, id);
        continue;
      }
      if (h.b !== 1) {
        edge.conn.sendRaw(data, h.o === 1, h.l === 1);
        continue;
      }
      edge.conn.sendBinary(data);
      this.pressure.check(id, edge);
    }
  }
}
