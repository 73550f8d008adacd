import type { JoinedFrame, ResumeFrame, WireError } from '../../src/protocol/messages.ts';
import type { RelayContext } from '../context.ts';
import type { Verdict } from '../join.ts';
import { LocalSeam } from '../local-seam.ts';
import type { Entered, LobbyJoiner, LobbyPlace, MemberConnection, PortMember, RoomSeam } from '../seam.ts';
import type { Refusal } from '../token/verify.ts';
import { ALIVE_MS, headerName, headerString as str, type Envelope, type NodeBus } from './bus.ts';
import type { RemoteLink } from './links.ts';
import type { ApiCall, Route } from '../api/routes.ts';
import { ClusterApi } from './cluster-api.ts';
import { ClusterFiles } from './node-files.ts';
import { ClusterEdges } from './edges.ts';
import { ClusterHost } from './host.ts';
import { RoomRecords } from './room-record.ts';
import { LEASE_MS, RoomHomes } from './homes.ts';
import type { RoomObservers } from '../rooms/observers.ts';
import { credentialPlace } from './credential.ts';
import { GuestTable } from './guests.ts';

/** How long a resume may look for its seat across nodes (ms): within the SDK's attempt. */
const RESUME_WITHIN_MS = 4000;
/** How often a node that does not answer yet is asked again whether it lives (ms). */
const ALIVE_WATCH_MS = 400;

/**
 * The room seam of a cluster node. Each room has one home node at a time, the holder of its
 * lease in Redis (`SET NX` with a time-out, renewed while the room lives there). Everything of a
 * room runs at its home, as on a single relay (the {@link LocalSeam}); a member connected to
 * another node enters, waits, resumes and acts through messages to the home, and the home
 * reaches its connection through a {@link RemoteLink}. Resume credentials start with the id of
 * the node that holds the seat and name the room. The home keeps the room's record in Redis
 * ({@link RoomRecords}): when it dies or shuts down, the next node to claim the lease restores
 * the room with every member away, and their clients resume there.
 */
export class ClusterSeam implements RoomSeam {
  private readonly local: LocalSeam;
  private readonly api: ClusterApi;
  /** The other nodes' HTTP sides, for the output files each keeps (`http-peers.ts`). */
  readonly files: ClusterFiles;
  private readonly records: RoomRecords;
  private readonly homes: RoomHomes;
  /** This node's connections to rooms homed elsewhere. */
  private readonly edges: ClusterEdges;
  private readonly guests: GuestTable;
  /** At rooms homed here: what their members' nodes ask. */
  private readonly host: ClusterHost;
  /** No node is declared dead before this time (ms since the epoch). */
  private judgeAfter = 0;
  /** Nodes found without a heartbeat at the last sweep: dead if still so at the next. */
  private missing = new Set<string>();
  private readonly sweep: ReturnType<typeof setInterval>;

  /** @param observers where the rooms' records join the other observers of this node's rooms */
  constructor(
    private readonly relay: RelayContext,
    private readonly bus: NodeBus,
    private readonly observers: RoomObservers | null,
  ) {
    this.local = new LocalSeam(relay);
    this.guests = new GuestTable(relay.frames, relay.budgets.held);
    this.records = new RoomRecords(relay, bus, Math.max(30_000, relay.config.resumeGraceMs + 2 * LEASE_MS));
    this.homes = new RoomHomes(relay, bus, this.records, (fn) => (observers ? observers.quietly(fn) : fn()), (project, roomId) => this.giveUp(project, roomId));
    observers?.add(this.records);
    relay.seats.onIssue = (member, room, credential) => this.records.issued(member, room, credential);
    relay.seats.seal = (unsigned) => this.files.seal(unsigned);
    this.edges = new ClusterEdges(relay, bus);
    this.files = new ClusterFiles(bus, (err) => relay.log.warn('cluster: where an output writes was not stored in Redis', { error: err instanceof Error ? err.message : String(err) }));
    observers?.add(this.files);
    this.api = new ClusterApi(relay, bus, (project, roomId) => this.homes.here(project, roomId));
    this.host = new ClusterHost(relay, bus, this.local, this.homes, this.guests, this.api);
    bus.onMessage((from, envelope) => this.receive(from, envelope));
    // frames to and from other nodes were lost meanwhile: members whose room is elsewhere come
    // back through a resume, which gives them the room as it is now
    bus.onRecovered(() => {
      // heartbeats written before Redis went away are gone too: no node is judged until they are written again
      this.judgeAfter = Date.now() + 2 * ALIVE_MS;
      this.edges.dropAll();
      // and the members of rooms homed here whose connections are elsewhere: what they asked meanwhile was lost
      for (const guest of this.guests.values()) guest.link.drop();
    });
    this.sweep = setInterval(() => void this.checkNodes(), ALIVE_MS / 2);
    this.sweep.unref();
  }

  /** Run a server-API call where its room lives. */
  runApi(route: Route, call: ApiCall<string>): Promise<unknown> {
    return this.api.run(route, call);
  }

  /**
   * Ask the room's home to take a member of this node (`t`: enter or wait), looking for the
   * home again once if the one found said it no longer is. Null: the home is this node.
   */
  private async askHome(t: 'enter' | 'wait', verdict: Verdict, conn: MemberConnection, joiner?: LobbyJoiner): Promise<{ answer: Envelope; home: string; link: string } | null> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const home = await this.homes.of(verdict.project, verdict.roomId);
      if (home === this.bus.node) return null;
      const link = this.edges.open(home, conn, joiner);
      const answer = await this.callHome(home, { t, verdict, link }, link, verdict);
      if (answer.header.notHome !== true) return { answer, home, link };
      this.edges.close(link);
      this.homes.forget(verdict.project, verdict.roomId);
    }
    throw new Error(`no node is the home of room ${verdict.roomId}`);
  }

  async enter(verdict: Verdict, conn: MemberConnection): Promise<Entered | Refusal> {
    const asked = await this.askHome('enter', verdict, conn);
    if (!asked) return this.local.enter(verdict, conn);
    const entered = this.entered(asked.answer, asked.home, asked.link);
    if ('code' in entered) this.edges.close(asked.link);
    return entered;
  }

  async wait(verdict: Verdict, joiner: LobbyJoiner): Promise<LobbyPlace | Refusal> {
    const asked = await this.askHome('wait', verdict, joiner.link, joiner);
    if (!asked) return this.local.wait(verdict, joiner);
    const { answer, home, link } = asked;
    const refusal = answer.header.refusal as Refusal | undefined;
    if (refusal) {
      this.edges.close(link);
      return refusal;
    }
    return {
      cancel: () => {
        this.edges.close(link);
        this.bus.send(home, { t: 'cancel', link });
      },
    };
  }

  /**
   * A resume goes to the node its credential names while that node lives; once it is dead, to
   * the room's home now (claimed, and the room restored from its record, by whichever node comes
   * first). A node that was just killed still looks alive for up to {@link ALIVE_MS}: the call is
   * given up once its heartbeat is gone, and the question asked again.
   */
  async resume(frame: ResumeFrame, conn: MemberConnection): Promise<Entered | WireError> {
    const place = credentialPlace(frame.credential);
    if (!place) return this.local.resume(frame, conn);
    const lost: WireError = { code: 'NOT_FOUND', kind: 'Request', reason: 'resume-unknown', message: 'this session can no longer be resumed: join again' };
    let elsewhere: string | null = null;
    const here = place.node === this.bus.node ? await this.local.resume(frame, conn) : null;
    // a seat held here answers whatever key signed it (a lookup in memory tells nothing of other rooms)
    if (here && !('code' in here && here.reason === 'resume-unknown')) return here;
    // past this, a resume needs no token: one no node of this cluster made asks nothing of Redis or of other nodes
    if (!(await this.files.sealed(frame.credential))) return lost;
    if (here) {
      if (this.homes.here(place.project, place.roomId)) return here;
      // this node gave the room up to the node that restored it (it was judged dead while it stalled): the seat is there
      elsewhere = await this.homes.holderElsewhere(place.project, place.roomId);
      if (!elsewhere) return here;
    }
    const deadline = Date.now() + RESUME_WITHIN_MS;
    while (Date.now() < deadline) {
      let target = elsewhere ?? place.node;
      if (!elsewhere && !(await this.bus.alive([place.node])).has(place.node)) {
        // a resume needs no token: one that names a room without a record claims nothing (a forged
        // credential cannot make this node take leases, nor read records, of rooms it names)
        if (!this.homes.here(place.project, place.roomId) && !(await this.records.exists(place.project, place.roomId))) return lost;
        this.homes.forget(place.project, place.roomId, place.node);
        target = await this.homes.of(place.project, place.roomId);
      }
      if (target === this.bus.node) return this.local.resume(frame, conn);
      const link = this.edges.open(target, conn);
      let answer: Envelope;
      try {
        answer = await this.callWhileAlive(target, { t: 'resume', frame, link });
      } catch {
        this.edges.giveUp(target, link);
        this.homes.forget(place.project, place.roomId, target);
        continue;
      }
      const moved = answer.header.notHome === true ? str(answer.header.home) : null;
      if (moved !== null) {
        this.edges.close(link);
        if (moved === this.bus.node) return this.local.resume(frame, conn);
        elsewhere = moved;
        continue;
      }
      const entered = this.entered(answer, target, link);
      if ('code' in entered) this.edges.close(link);
      return entered;
    }
    return lost;
  }

  /**
   * Call `node`, giving up as soon as its heartbeat is gone rather than at the call's time-out: a
   * node killed a moment ago still looks alive for up to {@link ALIVE_MS}, and a busy node that
   * lives is waited for (asking it twice would run the resume twice, the second with a spent
   * credential).
   */
  private callWhileAlive(node: string, header: Record<string, unknown>): Promise<Envelope> {
    return new Promise<Envelope>((resolve, reject) => {
      const watch = setInterval(() => {
        this.bus.alive([node]).then(
          (alive) => {
            if (!alive.has(node)) reject(new Error(`node ${node} is gone`));
          },
          () => undefined,
        );
      }, ALIVE_WATCH_MS);
      this.bus.call(node, header).then(resolve, reject).finally(() => clearInterval(watch));
    });
  }

  private async callHome(home: string, header: Record<string, unknown>, link: string, room?: Pick<Verdict, 'project' | 'roomId'>): Promise<Envelope> {
    try {
      return await this.bus.call(home, header);
    } catch (err) {
      // the home may seat it yet (a late answer is dropped): told, it leaves there
      this.edges.giveUp(home, link);
      if (room) this.homes.forget(room.project, room.roomId);
      throw err;
    }
  }

  /** The home's answer to an entry: the member's port, or why not. */
  private entered(answer: Envelope, home: string, link: string): Entered | Refusal {
    const { refusal, joined, member } = answer.header as { refusal?: Refusal; joined?: JoinedFrame; member?: PortMember };
    if (refusal) return refusal;
    if (!joined || !member) throw new Error('the home answered an entry without its member');
    return { port: this.edges.port(home, link, joined, member), joined };
  }

  private receive(from: string, envelope: Envelope): void {
    const type = envelope.header.t;
    if (this.edges.handles(type)) return this.edges.receive(from, envelope);
    if (this.host.handles(type)) return this.host.receive(from, envelope);
    this.relay.log.warn('cluster: unknown message', { type: headerName(type), from });
  }


  /**
   * Nodes that died: members of rooms homed here whose connections were there are away (their
   * seats held for the grace period, so that they resume elsewhere); connections here to rooms
   * homed there are dropped, so that their clients resume, and the room is restored from its
   * record on the live node that claims it first.
   */
  private async checkNodes(): Promise<void> {
    const nodes = new Set<string>();
    for (const g of this.guests.values()) nodes.add(g.link.edge);
    for (const n of this.edges.homes()) nodes.add(n);
    // and nodes only remembered as rooms' homes: a dead one must be forgotten, or a join (or the
    // sweep for rooms nobody came back to) would be sent there
    for (const n of this.homes.knownNodes()) nodes.add(n);
    nodes.delete(this.bus.node);
    if (nodes.size === 0) return;
    let alive: Set<string>;
    try {
      alive = await this.bus.alive([...nodes]);
    } catch {
      return; // Redis is away: nothing can be told about the others
    }
    if (Date.now() < this.judgeAfter) return;
    // dead: without a heartbeat at two sweeps in a row
    const dead = new Set([...nodes].filter((n) => !alive.has(n) && this.missing.has(n)));
    this.missing = new Set([...nodes].filter((n) => !alive.has(n)));
    if (dead.size === 0) return;
    for (const [key, guest] of this.guests.entries()) {
      if (!dead.has(guest.link.edge)) continue;
      this.guests.delete(key);
      // were it alive after all, its connection is cut, so that its client resumes and both agree
      guest.link.drop();
      guest.place?.cancel();
      if (guest.port && !guest.port.hold()) guest.port.leave();
    }
    this.homes.forgetNodes(dead);
    const dropped = this.edges.dropHomedOn(dead);
    this.relay.log.info('cluster: nodes are gone', { nodes: [...dead].join(' '), connectionsDropped: dropped });
  }

  /**
   * Another node holds the lease of a room that lives here: it restored the room from its record
   * while this node stalled and was judged dead. This node's copy goes, quietly (the webhooks and
   * the record belong to the room's home now): its members' connections are dropped and their
   * seats forgotten here, so that their resumes find the seats the new home restored.
   */
  private giveUp(project: string, roomId: string): void {
    const room = this.relay.rooms.get(project, roomId);
    if (!room) return;
    const links = [...room.members()].map((member) => {
      this.relay.seats.forget(member);
      return member.link;
    });
    for (const [key, guest] of this.guests.entries()) if (guest.port?.roomId === roomId && guest.port.member.project === project) this.guests.delete(key);
    const quietly = this.observers ? this.observers.quietly.bind(this.observers) : <T>(fn: () => T) => fn();
    quietly(() => this.relay.rooms.delete(room));
    for (const link of links) if ('drop' in link && typeof link.drop === 'function') (link as MemberConnection).drop();
  }

  /**
   * The node is about to shut down: its members' sessions end here but not in their rooms, whose
   * records stay for the next home (their clients resume on another node, as after a crash).
   */
  async leaving(): Promise<void> {
    // what its rooms go through as it closes is not what happens to them: they go on elsewhere
    this.records.freeze();
    this.observers?.mute();
    clearInterval(this.sweep);
    await this.homes.releaseAll();
    await this.files.withdraw();
    await this.bus.retire();
    for (const guest of this.guests.values()) guest.link.drop();
  }

  async close(): Promise<void> {
    clearInterval(this.sweep);
    this.edges.stop();
    await this.homes.releaseAll();
  }
}
