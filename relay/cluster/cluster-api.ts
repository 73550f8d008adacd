/**
 * The server API on a cluster node: a call about a room runs at the room's home (the node that
 * holds its lease), forwarded there through Redis after this node has authorized it and read
 * its body; `GET /rooms` pages through the project's rooms as Redis lists them and asks each
 * room's home for its summary. A call never opens a room: a room without a lease is not found.
 */
import type { WireError } from '../../src/protocol/codes.ts';
import { isId } from '../../src/protocol/parse.ts';
import type { RoomPage, RoomSummary } from '../../src/protocol/server-api.ts';
import { apiBudgets } from '../api/index.ts';
import { RECORDING_ROUTE, ROUTES, roomsPage, roomsPageQuery, summariesHere, type ApiCall, type Route } from '../api/routes.ts';
import type { RelayContext } from '../context.ts';
import { RelayError, toWireError } from '../errors.ts';
import { RECORDING_ID } from '../outputs/storage.ts';
import { clusterKey, type Envelope, type NodeBus } from './bus.ts';
import { placeKey } from './node-files.ts';

/** How long a forwarded call may take at the home: an output's start waits for its server (ms). */
const FORWARD_TIMEOUT_MS = 15_000;
/** Rounds of `GET /rooms` reading past rooms whose home is gone before it answers a shorter page. */
const ROOM_ROUNDS = 4;

/** Forget a room of the project's list unless a node holds its lease (claimed again meanwhile). */
const FORGET_ROOM = `if redis.call('exists', KEYS[2]) == 0 then return redis.call('zrem', KEYS[1], ARGV[1]) else return 0 end`;

interface Scripts {
  tesseraForgetRoom(list: string, lease: string, roomId: string): Promise<number>;
}

/** The server API's calls as one node runs them. */
export class ClusterApi {
  constructor(
    private readonly relay: RelayContext,
    private readonly bus: NodeBus,
    /** Whether the room lives on this node now. */
    private readonly homeHere: (project: string, roomId: string) => boolean,
  ) {
    bus.redis.defineCommand('tesseraForgetRoom', { numberOfKeys: 2, lua: FORGET_ROOM });
  }

  /** The sorted set of a project's rooms (by id), kept by their homes: added at a claim, removed at a release. */
  static roomsKey(project: string): string {
    return clusterKey('rooms', project);
  }

  /** Run a call where its room lives. */
  async run(route: Route, call: ApiCall<string>): Promise<unknown> {
    if (route.path === 'rooms') return this.listRooms(call);
    if (route.path === RECORDING_ROUTE) return this.runAtWriter(route, call);
    const roomId = (call.params as { room?: unknown }).room;
    const { project } = call.caller;
    if (typeof roomId !== 'string' || !isId(roomId) || this.homeHere(project, roomId)) return route.handle(call);
    for (let attempt = 0; attempt < 2; attempt++) {
      const home = await this.bus.redis.get(clusterKey('home', project, roomId));
      if (home === null || home === this.bus.node) return route.handle(call);
      const { result, notHome } = await this.forward(home, route, call);
      if (notHome) continue;
      return result;
    }
    return route.handle(call);
  }

  /**
   * A call about a recording's files runs at the node that wrote them, as Redis names it for
   * downloads (`node-files.ts`); here when Redis names none or this node. The writer is looked
   * up by the caller's project and the room of the path: another project's (or room's) recording
   * is not found, exactly as an id nobody made, before anything about its node is told.
   */
  private async runAtWriter(route: Route, call: ApiCall<string>): Promise<unknown> {
    const { room, recording } = call.params as { room?: unknown; recording?: unknown };
    const place = typeof room === 'string' && isId(room) && typeof recording === 'string' && RECORDING_ID.test(recording) ? ({ kind: 'recording', project: call.caller.project, roomId: room, id: recording } as const) : null;
    const node = place ? await this.bus.redis.get(placeKey(place)) : null;
    if (node === null || node === this.bus.node) return this.runAtWriterHere(route, call);
    if (!(await this.bus.alive([node])).has(node)) throw new RelayError('INTERNAL_ERROR', 'the node that holds this recording is not running: try again once it is back', 'unreachable');
    return (await this.forward(node, route, call)).result;
  }

  /**
   * A recording's call here, at the node that wrote its files: once they are deleted, so is the
   * Redis record naming this node their writer (nothing points to a deleted recording; a failure
   * to remove it is logged, the deletion stands).
   */
  private async runAtWriterHere(route: Route, call: ApiCall<string>): Promise<unknown> {
    const result = await route.handle(call);
    if (route.method === 'DELETE') {
      const { room, recording } = call.params as { room: string; recording: string };
      await this.bus.redis.del(placeKey({ kind: 'recording', project: call.caller.project, roomId: room, id: recording })).catch((err: Error) => {
        this.relay.log.warn('the deleted recording stays named in redis', { project: call.caller.project, room, recording, error: err.message });
      });
    }
    return result;
  }

  /** Run a call at another node: its result, or `notHome` when that node no longer holds the room. */
  private async forward(node: string, route: Route, call: ApiCall<string>): Promise<{ result?: unknown; notHome: boolean }> {
    let answer: Envelope;
    try {
      answer = await this.bus.call(node, { t: 'api', method: route.method, path: route.path, params: call.params, query: call.query.toString(), body: call.body, project: call.caller.project, apiKey: call.caller.apiKey }, null, FORWARD_TIMEOUT_MS);
    } catch {
      throw new RelayError('INTERNAL_ERROR', "the node of this room did not answer: try again", 'internal');
    }
    const { result, error, notHome } = answer.header as { result?: unknown; error?: WireError; notHome?: boolean };
    if (notHome === true) return { notHome: true };
    if (error) throw new RelayError(error.code, error.message, error.reason);
    return { result, notHome: false };
  }

  /** The project's rooms in id order, wherever they live. */
  private async listRooms(call: ApiCall<string>): Promise<RoomPage> {
    const { limit, after } = roomsPageQuery(call.query);
    const { project } = call.caller;
    const { redis } = this.bus;
    const rooms: RoomSummary[] = [];
    let from = after === null ? '-' : `(${after}`;
    for (let round = 0; round < ROOM_ROUNDS; round++) {
      const want = limit + 1 - rooms.length;
      const ids = await redis.zrangebylex(ClusterApi.roomsKey(project), from, '+', 'LIMIT', 0, want);
      if (ids.length === 0) break;
      rooms.push(...(await this.summaries(project, ids)));
      if (rooms.length > limit || ids.length < want) break;
      from = `(${ids.at(-1)!}`;
    }
    rooms.sort((a, b) => (a.roomId < b.roomId ? -1 : a.roomId > b.roomId ? 1 : 0));
    return roomsPage(call, rooms.slice(0, limit), rooms.length > limit);
  }

  /** Summaries of these rooms from their homes; rooms whose home is gone are taken off the list. */
  private async summaries(project: string, ids: string[]): Promise<RoomSummary[]> {
    const homes = await this.bus.redis.mget(ids.map((id) => clusterKey('home', project, id)));
    const byHome = new Map<string, string[]>();
    for (const [i, home] of homes.entries()) {
      const id = ids[i]!;
      if (home === null) {
        void (this.bus.redis as unknown as Scripts).tesseraForgetRoom(ClusterApi.roomsKey(project), clusterKey('home', project, id), id).catch(() => 0);
        continue;
      }
      byHome.set(home, [...(byHome.get(home) ?? []), id]);
    }
    const found = await Promise.all(
      [...byHome].map(async ([home, list]) => {
        if (home === this.bus.node) return summariesHere(this.relay, project, list);
        try {
          const answer = await this.bus.call(home, { t: 'api-rooms', project, ids: list });
          return Array.isArray(answer.header.rooms) ? (answer.header.rooms as RoomSummary[]) : [];
        } catch {
          return []; // its node did not answer: it is not listed (it is dead, or its rooms are found at the next call)
        }
      }),
    );
    return found.flat();
  }

  /** At a room's home: a call another node forwarded, or its request for summaries. */
  async serve(envelope: Envelope): Promise<void> {
    const h = envelope.header;
    const project = typeof h.project === 'string' ? h.project : '';
    if (h.t === 'api-rooms') {
      const ids = Array.isArray(h.ids) ? h.ids.filter((id): id is string => typeof id === 'string') : [];
      return this.bus.answer(envelope, { rooms: summariesHere(this.relay, project, ids) });
    }
    const route = ROUTES.find((r) => r.method === h.method && r.path === h.path);
    const params = h.params as Record<string, string> | undefined;
    if (!route || typeof h.apiKey !== 'string' || typeof params?.room !== 'string') return;
    // a recording's files are where they were written, whatever the room's home
    if (route.path !== RECORDING_ROUTE && !this.homeHere(project, params.room)) return this.bus.answer(envelope, { notHome: true });
    const call: ApiCall<string> = {
      relay: this.relay,
      caller: { project, apiKey: h.apiKey, budget: apiBudgets(this.relay).of(h.apiKey) },
      params,
      query: new URLSearchParams(typeof h.query === 'string' ? h.query : ''),
      body: (h.body ?? {}) as Record<string, unknown>,
    };
    try {
      this.bus.answer(envelope, { result: await (route.path === RECORDING_ROUTE ? this.runAtWriterHere(route, call) : route.handle(call)) });
    } catch (err) {
      if (!(err instanceof RelayError)) {
        this.relay.counters.faults++;
        this.relay.log.error('server API call from another node failed', { path: route.path, error: err instanceof Error ? err.message : String(err) });
      }
      this.bus.answer(envelope, { error: toWireError(err) });
    }
  }
}
