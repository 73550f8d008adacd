import type { JoinedFrame, ResumeFrame, WireError } from '../../src/protocol/messages.ts';
import type { RelayContext } from '../context.ts';
import type { Verdict } from '../join.ts';
import { LocalSeam } from '../local-seam.ts';
import type { Entered, LobbyJoiner, LobbyPlace, MemberConnection, PortMember, RoomPort, RoomSeam } from '../seam.ts';
import type { Refusal } from '../token/verify.ts';
import { ALIVE_MS, errorText, headerName, headerString as str, type Envelope, type NodeBus } from './bus.ts';
import { RemoteLink } from './links.ts';
import type { ApiCall, Route } from '../api/routes.ts';
import { ClusterApi } from './cluster-api.ts';
import { ClusterFiles } from './node-files.ts';
import { ClusterEdges } from './edges.ts';
import { RoomRecords } from './room-record.ts';
import { LEASE_MS, RoomHomes } from './homes.ts';
import type { Room } from '../rooms/types.ts';
import type { RoomObservers } from '../rooms/observers.ts';
import { isRecord } from '../../src/protocol/parse.ts';
import { credentialPlace } from './credential.ts';
import { wireError } from '../../src/protocol/codes.ts';
import { RecentMap } from '../recent-map.ts';
import { GuestTable, guestRequestBytes, type Guest } from './guests.ts';
import { requestFromBus } from '../data/raw-json.ts';

/** How long a resume may look for its seat across nodes (ms): within the SDK's attempt. */
const RESUME_WITHIN_MS = 4000;
/** Links given up by their nodes before this node knew them, remembered lately (each arrives within a call's timeout). */
const GONE_LINKS = 10_000;
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

  // ---- at the home: messages from members' nodes ----

  private guest(from: string, link: unknown): Guest | undefined {
    const id = str(link);
    return id === null ? undefined : this.guests.get(GuestTable.key(from, id));
  }

  /**
   * A message handled asynchronously: a failure is logged, never left to end the process (a
   * malformed message, from a node of another version, must not end every room of this one).
   */
  private later(envelope: Envelope, work: Promise<void>): void {
    work.catch((err: unknown) => this.relay.log.error('cluster: handling a message failed', { type: headerName(envelope.header.t), error: errorText(err) }));
  }

  /** What members' nodes say to this node as their rooms' home, by type. */
  private readonly hostMessages: Record<string, (from: string, envelope: Envelope) => void> = {
    enter: (from, envelope) => this.later(envelope, this.hostEntry(from, envelope)),
    resume: (from, envelope) => this.later(envelope, this.hostEntry(from, envelope)),
    wait: (from, envelope) => this.later(envelope, this.hostWait(from, envelope)),
    api: (_from, envelope) => this.later(envelope, this.api.serve(envelope)),
    'api-rooms': (_from, envelope) => this.later(envelope, this.api.serve(envelope)),
    req: (from, { header: h, payload }) => {
      const guest = this.guest(from, h.link);
      if (!guest?.port) return;
      const request = requestFromBus(h.request, h.raw, payload);
      if (!request) {
        // logged, and answered so that its caller does not wait for its timeout
        this.relay.log.warn('cluster: a request without its payload', { from });
        const id = (h.request as { id?: unknown } | null)?.id;
        if (typeof id === 'number') guest.link.send({ type: 'response', id, error: wireError('INTERNAL_ERROR', 'the request reached the room without its payload: send it again', 'internal') });
        return;
      }
      const queued = this.guests.run(GuestTable.key(from, guest.link.link), guest, ({ port, link }) => {
        const fault = (message: string, err: unknown) => this.relay.log.error(message, { error: err instanceof Error ? err.message : String(err) });
        port?.request(request, { send: (f) => link.send(f), sendOwn: (d) => link.sendRaw(d), fault }).catch((err: unknown) => fault('request failed after its answer', err));
      }, undefined, true, () => guestRequestBytes(h.request, payload));
      if (!queued && typeof request?.id === 'number') {
        guest.link.send({ type: 'response', id: request.id, error: { code: 'RATE_LIMITED', kind: 'Request', message: "your requests are waiting at the room's node: slow down", reason: 'message-rate' } });
      }
    },
    chunk: (from, { header: h, payload }) => {
      if (!payload) return;
      // taken once handled (in its token's turn), whoever it was for: the member's node may send its token more
      const taken = () => {
        if (typeof h.k === 'string') this.bus.send(from, { t: 'taken', k: h.k, bytes: payload.byteLength });
      };
      const guest = this.guest(from, h.link);
      if (!guest?.port) return taken();
      const bytes = Buffer.from(payload);
      // never refused: its node's input window bounds what waits
      this.guests.run(GuestTable.key(from, guest.link.link), guest, ({ port }) => port?.chunk(bytes), taken, false);
    },
    leave: (from, envelope) => this.guestLeft(from, envelope),
    hold: (from, envelope) => this.guestLeft(from, envelope),
    cancel: (from, { header: h }) => {
      const guest = this.guest(from, h.link);
      if (!guest) return this.goneBeforeKnown(from, h.link);
      this.guests.delete(`${from}\u0000${guest.link.link}`);
      guest.place?.cancel();
      // admitted here as its connection went: seated, it leaves
      guest.port?.leave();
    },
    pressure: (from, { header: h }) => {
      const guest = this.guest(from, h.link);
      if (guest && typeof h.bytes === 'number') guest.link.bufferedAmount = h.bytes;
    },
  };

  private receive(from: string, envelope: Envelope): void {
    const type = envelope.header.t;
    if (this.edges.handles(type)) return this.edges.receive(from, envelope);
    const host = typeof type === 'string' && Object.hasOwn(this.hostMessages, type) ? this.hostMessages[type] : undefined;
    if (host) return host(from, envelope);
    this.relay.log.warn('cluster: unknown message', { type: headerName(type), from });
  }

  /** A guest's connection left its room (or is held, `hold`, for a resume elsewhere). */
  private guestLeft(from: string, { header: h }: Envelope): void {
    const guest = this.guest(from, h.link);
    if (!guest) return this.goneBeforeKnown(from, h.link);
    this.guests.delete(`${from}\u0000${guest.link.link}`);
    // still waiting in the lobby (its node gave the wait up): the request goes
    guest.place?.cancel();
    if (h.t === 'leave' || !guest.port?.hold()) guest.port?.leave();
  }

  private guestLink(from: string, link: string): RemoteLink {
    const remote = new RemoteLink(this.bus, from, link);
    return remote;
  }

  /** A message of a shape this version does not know: logged, and answered as refused so that its sender does not wait. */
  private malformed(from: string, envelope: Envelope): void {
    this.relay.log.warn('cluster: malformed message', { type: headerName(envelope.header.t), from });
    this.bus.answer(envelope, { refusal: { code: 'INVALID_ARGUMENT', kind: 'Request', reason: 'malformed', message: 'the cluster message was malformed' } });
  }

  private async hostEntry(from: string, envelope: Envelope): Promise<void> {
    const h = envelope.header;
    const link = str(h.link);
    if (link === null) return;
    const entry: { verdict: Verdict } | { frame: ResumeFrame } | null = h.t === 'enter' ? (isVerdict(h.verdict) ? { verdict: h.verdict } : null) : isResumeFrame(h.frame) ? { frame: h.frame } : null;
    if (!entry) return this.malformed(from, envelope);
    if ('verdict' in entry && !(await this.homes.stillHere(entry.verdict.project, entry.verdict.roomId))) return this.bus.answer(envelope, { notHome: true });
    const place = 'frame' in entry ? credentialPlace(entry.frame.credential) : null;
    if (place) await this.homes.restored(place.project, place.roomId);
    const remote = this.guestLink(from, link);
    const outcome = 'verdict' in entry ? this.local.enterNow(entry.verdict, remote) : await this.local.resume(entry.frame, remote);
    if ('code' in outcome) {
      // a room this node gave up (it was judged dead while it stalled): the seat is at the node that restored it
      if (place && outcome.reason === 'resume-unknown' && !this.homes.here(place.project, place.roomId)) {
        const holder = await this.homes.holderElsewhere(place.project, place.roomId);
        if (holder) return this.bus.answer(envelope, { notHome: true, home: holder });
      }
      return this.bus.answer(envelope, { refusal: outcome });
    }
    this.hostMember(from, remote, outcome.port);
    this.bus.answer(envelope, { joined: outcome.joined, member: memberOf(outcome.port) });
  }

  /**
   * A member's node gave up a link this node does not know yet: its entry, resume or wait may
   * still be under way here (its answer would come too late), and must not seat it then.
   */
  private goneBeforeKnown(from: string, link: unknown): void {
    const id = str(link);
    if (id !== null) this.gone.set(GuestTable.key(from, id), true);
  }

  /** Links whose node gave them up before this node knew them (see {@link goneBeforeKnown}). */
  private readonly gone = new RecentMap<string, true>(GONE_LINKS);

  private hostMember(from: string, remote: RemoteLink, port: RoomPort): void {
    const key = `${from}\u0000${remote.link}`;
    if (this.gone.delete(key)) {
      // its node gave it up while this seated it: nothing there speaks for it
      port.leave();
      return;
    }
    this.guests.set(key, { link: remote, port });
    remote.onClose = () => {
      if (this.guests.get(key)?.port === port) this.guests.delete(key);
      port.leave();
    };
    remote.onReplaced = () => {
      if (this.guests.get(key)?.port === port) this.guests.delete(key);
    };
    this.homes.keep(port.member.project, port.roomId);
  }

  private async hostWait(from: string, envelope: Envelope): Promise<void> {
    const link = str(envelope.header.link);
    const verdict = envelope.header.verdict;
    if (link === null) return;
    if (!isVerdict(verdict)) return this.malformed(from, envelope);
    if (!(await this.homes.stillHere(verdict.project, verdict.roomId))) return this.bus.answer(envelope, { notHome: true });
    const remote = this.guestLink(from, link);
    const key = `${from}\u0000${link}`;
    let waiting = true;
    const joiner: LobbyJoiner = {
      get waitingForLobby() {
        return waiting;
      },
      link: remote,
      admitted: (entered) => {
        waiting = false;
        this.hostMember(from, remote, entered.port);
        this.bus.send(from, { t: 'admitted', link, joined: entered.joined, member: memberOf(entered.port) });
      },
      leaveLobby: (error) => {
        waiting = false;
        this.guests.delete(key);
        this.bus.send(from, { t: 'lobby-left', link, error });
      },
      send: (frame) => remote.send(frame),
    };
    const place = await this.local.wait(verdict, joiner);
    if ('code' in place) return this.bus.answer(envelope, { refusal: place });
    if (this.gone.delete(key)) return place.cancel();
    this.guests.set(key, { link: remote, place });
    this.bus.answer(envelope, { ok: true });
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

/**
 * Whether a node's entry carries a verdict of this version's shape. The member's node judged the
 * token; a cluster trusts its nodes, but a message of another version (or a corrupted one) is
 * refused, not followed into a crash.
 */
function isVerdict(v: unknown): v is Verdict {
  return (
    isRecord(v) &&
    isRecord(v.frame) &&
    isRecord(v.claims) &&
    isRecord(v.claims.grant) &&
    typeof v.project === 'string' &&
    typeof v.roomId === 'string' &&
    typeof v.tokenKey === 'string' &&
    typeof v.pinned === 'boolean' &&
    typeof v.ask === 'boolean' &&
    (v.opener === 'room' || v.opener === 'domain')
  );
}

function isResumeFrame(v: unknown): v is ResumeFrame {
  return isRecord(v) && typeof v.v === 'number' && typeof v.credential === 'string';
}

function memberOf(port: RoomPort): PortMember {
  const { id, tier, project, tokenKey, domainWide } = port.member;
  return { id, tier, project, tokenKey, domainWide };
}
