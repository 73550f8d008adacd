/**
 * At a room's home, what the nodes of its members elsewhere ask of it: entries, resumes and lobby
 * waits run in this node's {@link LocalSeam}, then the member's requests, chunks, pressure and
 * departure; each such member is a guest (`guests.ts`) reached through a {@link RemoteLink}.
 */
import type { ResumeFrame } from '../../src/protocol/messages.ts';
import { isRecord } from '../../src/protocol/parse.ts';
import { wireError } from '../../src/protocol/codes.ts';
import type { RelayContext } from '../context.ts';
import type { Verdict } from '../join.ts';
import type { LocalSeam } from '../local-seam.ts';
import type { LobbyJoiner, PortMember, RoomPort } from '../seam.ts';
import { RecentMap } from '../recent-map.ts';
import { requestFromBus } from '../data/raw-json.ts';
import { errorText, headerName, headerString as str, type Envelope, type NodeBus } from './bus.ts';
import { RemoteLink } from './links.ts';
import type { ClusterApi } from './cluster-api.ts';
import type { RoomHomes } from './homes.ts';
import { credentialPlace } from './credential.ts';
import { GuestTable, guestRequestBytes, type Guest } from './guests.ts';

/** Links given up by their nodes before this node knew them, remembered lately (each arrives within a call's timeout). */
const GONE_LINKS = 10_000;

/** This node as the home of rooms: their members on other nodes, through the messages their nodes send. */
export class ClusterHost {
  constructor(
    private readonly relay: RelayContext,
    private readonly bus: NodeBus,
    private readonly local: LocalSeam,
    private readonly homes: RoomHomes,
    private readonly guests: GuestTable,
    private readonly api: ClusterApi,
  ) {}

  /** Whether `type` names a message members' nodes send their rooms' home. */
  handles(type: unknown): boolean {
    return typeof type === 'string' && Object.hasOwn(this.messages, type);
  }

  /** A message from a member's node to this node as its room's home. */
  receive(from: string, envelope: Envelope): void {
    const type = envelope.header.t;
    if (this.handles(type)) this.messages[type as string]!(from, envelope);
  }

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
  private readonly messages: Record<string, (from: string, envelope: Envelope) => void> = {
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
