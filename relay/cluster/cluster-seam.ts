import type { JoinedFrame, RequestFrame, ResumeFrame, WireError } from '../../src/protocol/messages.ts';
import type { RelayContext } from '../context.ts';
import type { Verdict } from '../join.ts';
import { LocalSeam } from '../local-seam.ts';
import type { Entered, LobbyJoiner, LobbyPlace, MemberConnection, PortMember, RoomPort, RoomSeam } from '../seam.ts';
import type { Refusal } from '../token/verify.ts';
import { ALIVE_MS, clusterKey, type Envelope, type NodeBus } from './bus.ts';
import { RemoteLink, RemotePort } from './links.ts';
import { TokenBucket } from '../data/token-bucket.ts';
import type { ApiCall, Route } from '../api/routes.ts';
import { ClusterApi } from './cluster-api.ts';
import { RoomRecords, restoreRoom } from './room-record.ts';
import type { Room } from '../rooms/types.ts';
import type { RoomObservers } from '../rooms/observers.ts';
import { isId } from '../../src/protocol/parse.ts';

/** How long a node's claim to be a room's home lasts unless renewed (ms). */
export const LEASE_MS = 6000;
/** How often a home renews the claims of the rooms it holds (ms). */
const RENEW_MS = 2000;
/** How long a resume may look for its seat across nodes (ms): within the SDK's attempt. */
const RESUME_WITHIN_MS = 4000;
/** How long one node has to answer a resume before it is asked again whether it lives (ms). */
const RESUME_CALL_MS = 1200;

/** Renew a lease if this node holds it: PEXPIRE only when the value is ours. */
const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
/** Give up a lease if this node holds it. */
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/** The scripts {@link ClusterSeam} defines on its Redis connection. */
interface Scripts {
  tesseraRenew(key: string, node: string, ms: number): Promise<number>;
  tesseraRelease(key: string, node: string): Promise<number>;
  tesseraForgetRoom(list: string, lease: string, roomId: string): Promise<number>;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const roomKey = (project: string, roomId: string) => `${project}\u0000${roomId}`;

/** At this node, for a room homed elsewhere: one of its connections, by link id. */
interface Edge {
  readonly conn: MemberConnection;
  /** The node its room is homed on. */
  readonly home: string;
  readonly joiner?: LobbyJoiner;
}

/** At the home, a member (or lobby joiner) whose connection is on another node. */
interface Guest {
  readonly link: RemoteLink;
  port?: RoomPort;
  place?: LobbyPlace;
}

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
  private readonly records: RoomRecords;
  /** Rooms being restored from their records here, by room key: entries wait for them. */
  private readonly restoring = new Map<string, Promise<void>>();
  private readonly edges = new Map<string, Edge>();
  private readonly guests = new Map<string, Guest>();
  /** Leases this node holds, by room key. */
  private readonly leases = new Map<string, { project: string; roomId: string }>();
  /** Homes of rooms elsewhere found before, by room key: forgotten when the node dies or says it is not the home. */
  private readonly homes = new Map<string, string>();
  private nextLink = 1;
  /** No node is declared dead before this time (ms since the epoch). */
  private judgeAfter = 0;
  /** Nodes found without a heartbeat at the last sweep: dead if still so at the next. */
  private missing = new Set<string>();
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly sweep: ReturnType<typeof setInterval>;

  /** @param observers where the rooms' records join the other observers of this node's rooms */
  constructor(
    private readonly relay: RelayContext,
    private readonly bus: NodeBus,
    observers: RoomObservers | null,
  ) {
    this.local = new LocalSeam(relay);
    this.records = new RoomRecords(relay, bus, Math.max(30_000, relay.config.resumeGraceMs + 2 * LEASE_MS));
    observers?.add(this.records);
    relay.seats.onIssue = (member, room, credential) => this.records.issued(member, room, credential);
    this.api = new ClusterApi(relay, bus, (project, roomId) => this.homeHere(project, roomId));
    bus.onMessage((from, envelope) => this.receive(from, envelope));
    // frames to and from other nodes were lost meanwhile: members whose room is elsewhere come
    // back through a resume, which gives them the room as it is now
    bus.onRecovered(() => {
      // heartbeats written before Redis went away are gone too: no node is judged until they are written again
      this.judgeAfter = Date.now() + 2 * ALIVE_MS;
      for (const [id, edge] of [...this.edges]) {
        this.edges.delete(id);
        edge.conn.drop();
      }
      // and the members of rooms homed here whose connections are elsewhere: what they asked meanwhile was lost
      for (const guest of this.guests.values()) guest.link.drop();
    });
    // a ban is the room's, wherever it is homed next: kept in Redis until the token expires
    relay.bans.onAdd = (project, roomId, tokenKey, exp) => {
      const key = clusterKey('bans', project, roomId);
      bus.redis
        .multi()
        .hset(key, tokenKey, String(exp))
        .expireat(key, Math.ceil(exp), 'GT')
        .expireat(key, Math.ceil(exp), 'NX')
        .exec()
        .catch((err: unknown) => relay.log.error('cluster: a ban was not stored in Redis', { room: roomId, error: err instanceof Error ? err.message : String(err) }));
    };
    bus.redis.defineCommand('tesseraRenew', { numberOfKeys: 1, lua: RENEW });
    bus.redis.defineCommand('tesseraRelease', { numberOfKeys: 1, lua: RELEASE });
    this.timer = setInterval(() => void this.renew(), RENEW_MS);
    this.timer.unref();
    this.sweep = setInterval(() => void this.checkNodes(), ALIVE_MS / 2);
    this.sweep.unref();
  }

  /**
   * What the credential of a seat in `room` on `node` starts with: the node (where the seat is
   * while it lives) and the room (where its next home restored it once the node is gone).
   */
  static credentialPrefix(node: string, room: Pick<Room, 'project' | 'id'>): string {
    return `${node}.${Buffer.from(room.project).toString('base64url')}.${Buffer.from(room.id).toString('base64url')}.`;
  }

  /** The node and room a credential names, if it is one of a cluster's. */
  static credentialPlace(credential: string): { node: string; project: string; roomId: string } | null {
    const [node, project, roomId, secret] = credential.split('.', 4);
    if (!node || project === undefined || roomId === undefined || !secret) return null;
    const place = { node, project: Buffer.from(project, 'base64url').toString('utf8'), roomId: Buffer.from(roomId, 'base64url').toString('utf8') };
    return isId(place.roomId) && place.project.length > 0 && place.project.length <= 256 ? place : null;
  }

  /** Whether the room lives on this node, under its lease. */
  private homeHere(project: string, roomId: string): boolean {
    return this.relay.rooms.get(project, roomId) !== undefined && this.leases.has(roomKey(project, roomId));
  }

  /** Run a server-API call where its room lives. */
  runApi(route: Route, call: ApiCall<string>): Promise<unknown> {
    return this.api.run(route, call);
  }

  /** The node that is the room's home, claiming it for this node when nobody holds it. */
  private async home(project: string, roomId: string): Promise<string> {
    const rk = roomKey(project, roomId);
    await this.restoring.get(rk);
    // a room that lives here under this node's lease, or a home found before: no Redis round trip
    if (this.homeHere(project, roomId)) return this.bus.node;
    const known = this.homes.get(rk);
    if (known) return known;
    const found = await this.claimOrFind(project, roomId);
    if (found !== this.bus.node) this.homes.set(rk, found);
    return found;
  }

  /** Claim the room's lease for this node, or name its live holder. */
  private async claimOrFind(project: string, roomId: string): Promise<string> {
    const key = clusterKey('home', project, roomId);
    const { redis, node } = this.bus;
    for (let attempt = 0; attempt < 3; attempt++) {
      if ((await redis.set(key, node, 'PX', LEASE_MS, 'NX')) === 'OK') {
        this.leases.set(roomKey(project, roomId), { project, roomId });
        const rk = roomKey(project, roomId);
        const ready = Promise.all([this.learnBans(project, roomId), redis.zadd(ClusterApi.roomsKey(project), 0, roomId), this.restore(project, roomId)]).then(() => undefined);
        this.restoring.set(rk, ready);
        try {
          await ready;
        } finally {
          this.restoring.delete(rk);
        }
        return node;
      }
      const holder = await redis.get(key);
      if (holder === node) {
        this.leases.set(roomKey(project, roomId), { project, roomId });
        // claimed by another entry of this node a moment ago: its restore comes first
        await this.restoring.get(roomKey(project, roomId));
      }
      if (!holder) continue;
      if (holder === node || (await this.bus.alive([holder])).has(holder)) return holder;
      // its home died with the room: the lease is given up for a new home to claim
      await (redis as unknown as Scripts).tesseraRelease(key, holder);
    }
    throw new Error(`no home for room ${roomId}`);
  }

  /** This node is the room's home now: if its last home died with members in it, they are restored here. */
  private async restore(project: string, roomId: string): Promise<void> {
    const stored = await this.records.load(project, roomId);
    if (stored) restoreRoom(this.relay, project, roomId, stored);
  }

  /** The room's bans from Redis, where its earlier homes kept them: this node is its home now. */
  private async learnBans(project: string, roomId: string): Promise<void> {
    const bans = await this.bus.redis.hgetall(clusterKey('bans', project, roomId));
    for (const [tokenKey, exp] of Object.entries(bans)) this.relay.bans.learn(project, roomId, tokenKey, Number(exp));
  }

  private link(home: string, conn: MemberConnection, joiner?: LobbyJoiner): string {
    const id = `${this.nextLink++}`;
    this.edges.set(id, joiner ? { conn, home, joiner } : { conn, home });
    return id;
  }

  private port(home: string, link: string, joined: JoinedFrame, member: PortMember): RoomPort {
    const { fanoutByteRate, fanoutByteBurst } = this.relay.config;
    return new RemotePort(this.bus, home, link, joined.roomId, member, () => this.edges.delete(link), new TokenBucket(fanoutByteRate, fanoutByteBurst));
  }

  /**
   * Ask the room's home to take a member of this node (`t`: enter or wait), looking for the
   * home again once if the one found said it no longer is. Null: the home is this node.
   */
  private async askHome(t: 'enter' | 'wait', verdict: Verdict, conn: MemberConnection, joiner?: LobbyJoiner): Promise<{ answer: Envelope; home: string; link: string } | null> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const home = await this.home(verdict.project, verdict.roomId);
      if (home === this.bus.node) return null;
      const link = this.link(home, conn, joiner);
      const answer = await this.callHome(home, { t, verdict, link }, link, verdict);
      if (answer.header.notHome !== true) return { answer, home, link };
      this.edges.delete(link);
      this.homes.delete(roomKey(verdict.project, verdict.roomId));
    }
    throw new Error(`no node is the home of room ${verdict.roomId}`);
  }

  async enter(verdict: Verdict, conn: MemberConnection): Promise<Entered | Refusal> {
    const asked = await this.askHome('enter', verdict, conn);
    if (!asked) return this.local.enter(verdict, conn);
    const entered = this.entered(asked.answer, asked.home, asked.link);
    if ('code' in entered) this.edges.delete(asked.link);
    return entered;
  }

  async wait(verdict: Verdict, joiner: LobbyJoiner): Promise<LobbyPlace | Refusal> {
    const asked = await this.askHome('wait', verdict, joiner.link, joiner);
    if (!asked) return this.local.wait(verdict, joiner);
    const { answer, home, link } = asked;
    const refusal = answer.header.refusal as Refusal | undefined;
    if (refusal) {
      this.edges.delete(link);
      return refusal;
    }
    return {
      cancel: () => {
        this.edges.delete(link);
        this.bus.send(home, { t: 'cancel', link });
      },
    };
  }

  /**
   * A resume goes to the node its credential names while that node lives; once it is dead, to
   * the room's home now (claimed, and the room restored from its record, by whichever node comes
   * first). A node that was just killed still looks alive for up to {@link ALIVE_MS}: a call it
   * does not answer is given up after {@link RESUME_CALL_MS} and the question asked again.
   */
  async resume(frame: ResumeFrame, conn: MemberConnection): Promise<Entered | WireError> {
    const place = ClusterSeam.credentialPlace(frame.credential);
    if (!place || place.node === this.bus.node) return this.local.resume(frame, conn);
    const lost: WireError = { code: 'NOT_FOUND', kind: 'Request', reason: 'resume-unknown', message: 'this session can no longer be resumed: join again' };
    const rk = roomKey(place.project, place.roomId);
    const deadline = Date.now() + RESUME_WITHIN_MS;
    while (Date.now() < deadline) {
      let target = place.node;
      if (!(await this.bus.alive([place.node])).has(place.node)) {
        // a resume needs no token: one that names a room without a record claims nothing (a forged
        // credential cannot make this node take leases, nor read records, of rooms it names)
        if (!this.homeHere(place.project, place.roomId) && !(await this.records.exists(place.project, place.roomId))) return lost;
        if (this.homes.get(rk) === place.node) this.homes.delete(rk);
        target = await this.home(place.project, place.roomId);
      }
      if (target === this.bus.node) return this.local.resume(frame, conn);
      const link = this.link(target, conn);
      let answer: Envelope;
      try {
        answer = await this.bus.call(target, { t: 'resume', frame, link }, null, RESUME_CALL_MS);
      } catch {
        this.edges.delete(link);
        if (this.homes.get(rk) === target) this.homes.delete(rk);
        continue;
      }
      const entered = this.entered(answer, target, link);
      if ('code' in entered) this.edges.delete(link);
      return entered;
    }
    return lost;
  }

  private async callHome(home: string, header: Record<string, unknown>, link: string, room?: Pick<Verdict, 'project' | 'roomId'>): Promise<Envelope> {
    try {
      return await this.bus.call(home, header);
    } catch (err) {
      this.edges.delete(link);
      if (room) this.homes.delete(roomKey(room.project, room.roomId));
      throw err;
    }
  }

  /**
   * At the home, before a room is opened for a member of another node: this node must hold the
   * room's lease (the other node may have found it here before the room ended and the lease
   * was given up). False: another node is the home now.
   */
  private async stillHome(verdict: Verdict): Promise<boolean> {
    if (this.homeHere(verdict.project, verdict.roomId)) return true;
    return (await this.claimOrFind(verdict.project, verdict.roomId)) === this.bus.node;
  }

  /** The home's answer to an entry: the member's port, or why not. */
  private entered(answer: Envelope, home: string, link: string): Entered | Refusal {
    const { refusal, joined, member } = answer.header as { refusal?: Refusal; joined?: JoinedFrame; member?: PortMember };
    if (refusal) return refusal;
    if (!joined || !member) throw new Error('the home answered an entry without its member');
    return { port: this.port(home, link, joined, member), joined };
  }

  // ---- at the home: messages from members' nodes ----

  private guest(from: string, link: unknown): Guest | undefined {
    const id = str(link);
    return id === null ? undefined : this.guests.get(`${from}\u0000${id}`);
  }

  private receive(from: string, envelope: Envelope): void {
    const h = envelope.header;
    switch (h.t) {
      // at the home
      case 'enter':
      case 'resume':
        return void this.hostEntry(from, envelope);
      case 'wait':
        return void this.hostWait(from, envelope);
      case 'api':
      case 'api-rooms':
        return void this.api.serve(envelope);
      case 'req': {
        const guest = this.guest(from, h.link);
        if (!guest?.port) return;
        const link = guest.link;
        void guest.port.request(h.request as RequestFrame, { send: (f) => link.send(f), sendOwn: (d) => link.sendRaw(d), fault: (message, err) => this.relay.log.error(message, { error: err instanceof Error ? err.message : String(err) }) });
        return;
      }
      case 'chunk':
        if (envelope.payload) this.guest(from, h.link)?.port?.chunk(Buffer.from(envelope.payload));
        return;
      case 'leave':
      case 'hold': {
        const guest = this.guest(from, h.link);
        if (!guest) return;
        this.guests.delete(`${from}\u0000${guest.link.link}`);
        if (h.t === 'leave' || !guest.port?.hold()) guest.port?.leave();
        return;
      }
      case 'cancel': {
        const guest = this.guest(from, h.link);
        if (!guest) return;
        this.guests.delete(`${from}\u0000${guest.link.link}`);
        guest.place?.cancel();
        return;
      }
      // at the member's node
      case 'frame': {
        const { payload } = envelope;
        if (!payload || !Array.isArray(h.links)) return;
        // one copy of the bytes for all its links, as a fan-out on a single relay shares one buffer
        const data = Buffer.from(payload);
        for (const link of h.links) {
          const edge = this.edges.get(str(link) ?? '');
          if (!edge) continue;
          if (h.b === 1) edge.conn.sendBinary(data);
          else edge.conn.sendRaw(data, h.o === 1);
        }
        return;
      }
      case 'close': {
        const id = str(h.link) ?? '';
        const edge = this.edges.get(id);
        if (!edge) return;
        this.edges.delete(id);
        edge.conn.close(typeof h.code === 'number' ? h.code : 1011, str(h.reason) ?? '');
        return;
      }
      case 'replaced': {
        const id = str(h.link) ?? '';
        const edge = this.edges.get(id);
        this.edges.delete(id);
        edge?.conn.replaced?.();
        return;
      }
      case 'flooded':
        return this.edges.get(str(h.link) ?? '')?.conn.flooded();
      case 'drop':
        return this.edges.get(str(h.link) ?? '')?.conn.drop();
      case 'admitted': {
        const id = str(h.link) ?? '';
        const edge = this.edges.get(id);
        const { joined, member } = h as { joined?: JoinedFrame; member?: PortMember };
        if (!edge?.joiner || !joined || !member) return;
        this.edges.set(id, { conn: edge.conn, home: edge.home });
        edge.joiner.admitted({ port: this.port(from, id, joined, member), joined });
        return;
      }
      case 'lobby-left': {
        const id = str(h.link) ?? '';
        const edge = this.edges.get(id);
        if (!edge?.joiner) return;
        this.edges.delete(id);
        edge.joiner.leaveLobby(h.error as WireError);
        return;
      }
      default:
        this.relay.log.warn('cluster: unknown message', { type: String(h.t), from });
    }
  }

  private guestLink(from: string, link: string): RemoteLink {
    const remote = new RemoteLink(this.bus, from, link);
    return remote;
  }

  private async hostEntry(from: string, envelope: Envelope): Promise<void> {
    const h = envelope.header;
    const link = str(h.link);
    if (link === null) return;
    if (h.t === 'enter' && !(await this.stillHome(h.verdict as Verdict))) return this.bus.answer(envelope, { notHome: true });
    if (h.t === 'resume') {
      const place = ClusterSeam.credentialPlace(str((h.frame as { credential?: unknown } | undefined)?.credential) ?? '');
      if (place) await this.restoring.get(roomKey(place.project, place.roomId));
    }
    const remote = this.guestLink(from, link);
    const outcome = h.t === 'enter' ? this.local.enterNow(h.verdict as Verdict, remote) : await this.local.resume(h.frame as ResumeFrame, remote);
    if ('code' in outcome) return this.bus.answer(envelope, { refusal: outcome });
    this.hostMember(from, remote, outcome.port);
    this.bus.answer(envelope, { joined: outcome.joined, member: memberOf(outcome.port) });
  }

  private hostMember(from: string, remote: RemoteLink, port: RoomPort): void {
    const key = `${from}\u0000${remote.link}`;
    this.guests.set(key, { link: remote, port });
    remote.onClose = () => {
      if (this.guests.get(key)?.port === port) this.guests.delete(key);
      port.leave();
    };
    remote.onReplaced = () => {
      if (this.guests.get(key)?.port === port) this.guests.delete(key);
    };
    this.keepLease(port);
  }

  private async hostWait(from: string, envelope: Envelope): Promise<void> {
    const link = str(envelope.header.link);
    if (link === null) return;
    if (!(await this.stillHome(envelope.header.verdict as Verdict))) return this.bus.answer(envelope, { notHome: true });
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
    const place = await this.local.wait(envelope.header.verdict as Verdict, joiner);
    if ('code' in place) return this.bus.answer(envelope, { refusal: place });
    this.guests.set(key, { link: remote, place });
    this.bus.answer(envelope, { ok: true });
  }

  private keepLease(port: RoomPort): void {
    this.leases.set(roomKey(port.member.project, port.roomId), { project: port.member.project, roomId: port.roomId });
  }

  /** Renew the leases of the rooms this node holds; give up those of rooms that are gone. */
  private async renew(): Promise<void> {
    const redis = this.bus.redis as unknown as Scripts;
    for (const [key, { project, roomId }] of [...this.leases]) {
      const redisKey = clusterKey('home', project, roomId);
      try {
        if (this.relay.rooms.get(project, roomId)) {
          if ((await redis.tesseraRenew(redisKey, this.bus.node, LEASE_MS)) === 1) {
            await this.records.renew(project, roomId);
            continue;
          }
          // the lease is gone (Redis restarted empty, or this node stalled past it): claim it again
          if ((await this.bus.redis.set(redisKey, this.bus.node, 'PX', LEASE_MS, 'NX')) !== 'OK') {
            this.relay.log.warn('cluster: another node claimed a room that lives here', { room: roomId, project });
          } else {
            await this.bus.redis.zadd(ClusterApi.roomsKey(project), 0, roomId);
          }
        } else {
          this.leases.delete(key);
          await this.release(project, roomId);
        }
      } catch (err) {
        this.relay.log.warn('cluster: lease renewal failed', { room: roomId, error: err instanceof Error ? err.message : String(err) });
      }
    }
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
    for (const e of this.edges.values()) nodes.add(e.home);
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
    for (const [key, guest] of [...this.guests]) {
      if (!dead.has(guest.link.edge)) continue;
      this.guests.delete(key);
      // were it alive after all, its connection is cut, so that its client resumes and both agree
      guest.link.drop();
      guest.place?.cancel();
      if (guest.port && !guest.port.hold()) guest.port.leave();
    }
    for (const [key, home] of [...this.homes]) if (dead.has(home)) this.homes.delete(key);
    let dropped = 0;
    for (const [id, edge] of [...this.edges]) {
      if (!dead.has(edge.home)) continue;
      this.edges.delete(id);
      edge.conn.drop();
      dropped++;
    }
    this.relay.log.info('cluster: nodes are gone', { nodes: [...dead].join(' '), connectionsDropped: dropped });
  }

  /** Give up the room's lease, and its place in its project's list if nobody claimed it meanwhile. */
  private async release(project: string, roomId: string): Promise<void> {
    const redis = this.bus.redis as unknown as Scripts;
    if ((await redis.tesseraRelease(clusterKey('home', project, roomId), this.bus.node)) === 1) {
      await redis.tesseraForgetRoom(ClusterApi.roomsKey(project), clusterKey('home', project, roomId), roomId);
    }
  }

  /**
   * The node is about to shut down: its members' sessions end here but not in their rooms, whose
   * records stay for the next home (their clients resume on another node, as after a crash).
   */
  async leaving(): Promise<void> {
    this.records.freeze();
    clearInterval(this.timer);
    clearInterval(this.sweep);
    await Promise.all([...this.leases.values()].map(({ project, roomId }) => this.release(project, roomId).catch(() => 0)));
    this.leases.clear();
    await this.bus.retire();
    for (const guest of this.guests.values()) guest.link.drop();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.sweep);
    const redis = this.bus.redis as unknown as Scripts;
    await Promise.all([...this.leases.values()].map(({ project, roomId }) => this.release(project, roomId).catch(() => 0)));
    this.leases.clear();
  }
}

function memberOf(port: RoomPort): PortMember {
  const { id, tier, project, tokenKey } = port.member;
  return { id, tier, project, tokenKey };
}
