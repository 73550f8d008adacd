/**
 * The routes of the server API, `/api/v1/...`: one typed table, each route with its method,
 * its path (`:name` segments are parameters, typed from the path), how it takes a body, and
 * its handler. Every call acts in its token's project only: rooms are looked up by project and
 * room id, so another project's room is simply not found.
 */
import { ADMIN_ACTOR, type ParticipantPage, type PublishResult, type RoomPage, type RoomSummary } from '../../src/protocol/server-api.ts';
import { OUTPUTS, type OutputName, type OutputStatus } from '../../src/protocol/control.ts';
import { isId } from '../../src/protocol/parse.ts';
import { parseParams } from '../../src/protocol/validate.ts';
import type { RelayContext } from '../context.ts';
import { RelayError } from '../errors.ts';
import { publishFrom } from '../handlers/data.ts';
import { endRoomFor, removeMemberFor } from '../handlers/moderation.ts';
import { pageBytes, tierPage } from '../handlers/participants.ts';
import type { Room } from '../rooms/types.ts';
import type { Caller } from './auth.ts';
import type { BodyRule } from './body.ts';
import { deleteRecordingHere } from './recordings.ts';

/** The parameters of a path template: `rooms/:room` → `{ room: string }`. */
export type PathParams<P extends string> = P extends `${infer A}/${infer B}` ? PathParams<A> & PathParams<B> : P extends `:${infer N}` ? { [K in N]: string } : {};

/** A request as a handler sees it: its caller, path parameters, query and body. */
export interface ApiCall<P extends string> {
  relay: RelayContext;
  caller: Caller;
  params: PathParams<P>;
  query: URLSearchParams;
  body: Record<string, unknown>;
}

/** One route of the table. */
export interface Route<P extends string = string> {
  method: 'GET' | 'POST' | 'DELETE';
  path: P;
  body: BodyRule;
  handle(call: ApiCall<P>): unknown;
}

const route = <P extends string>(method: Route['method'], path: P, body: BodyRule, handle: (call: ApiCall<P>) => unknown): Route =>
  ({ method, path, body, handle }) as Route;

/** Largest page of `GET /rooms`; `GET .../participants` takes the SDK's 1..1000. */
export const MAX_ROOMS_PAGE = 100;
const DEFAULT_ROOMS_PAGE = 50;

function roomOf(call: Pick<ApiCall<string>, 'relay' | 'caller'> & { params: { room: string } }): Room {
  const id = call.params.room;
  const room = isId(id) ? call.relay.rooms.get(call.caller.project, id) : undefined;
  if (!room) throw new RelayError('NOT_FOUND', `no room "${id.slice(0, 128)}" is open in this project`, 'unknown-room');
  return room;
}

function summary(room: Room): RoomSummary {
  return { roomId: room.id, createdAt: room.createdAt, counts: room.counts(), lobby: room.lobby.size, outputs: room.outputs.statuses() };
}

/** The summaries of those of `ids` that are open here in `project`. */
export function summariesHere(relay: RelayContext, project: string, ids: readonly string[]): RoomSummary[] {
  const found: RoomSummary[] = [];
  for (const id of ids) {
    const room = isId(id) ? relay.rooms.get(project, id) : undefined;
    if (room) found.push(summary(room));
  }
  return found;
}

/** An integer query value within bounds, or its default when absent. */
function integerQuery(query: URLSearchParams, name: string, min: number, max: number, fallback: number): number {
  const text = query.get(name);
  if (text === null) return fallback;
  const n = Number(text);
  if (!/^\d{1,7}$/.test(text) || n < min || n > max) throw new RelayError('INVALID_ARGUMENT', `${name} must be an integer from ${min} to ${max}`, 'bad-query');
  return n;
}

/** The page `GET /rooms` asks for: its size, and the id its cursor names (rooms come by id). */
export function roomsPageQuery(query: URLSearchParams): { limit: number; after: string | null } {
  const limit = integerQuery(query, 'limit', 1, MAX_ROOMS_PAGE, DEFAULT_ROOMS_PAGE);
  const cursor = query.get('cursor');
  let after: string | null = null;
  if (cursor !== null) {
    after = Buffer.from(cursor, 'base64url').toString('utf8');
    if (!isId(after) || Buffer.from(after).toString('base64url') !== cursor) throw new RelayError('INVALID_ARGUMENT', 'unknown cursor: start again without one', 'bad-cursor');
  }
  return { limit, after };
}

/**
 * The page of rooms: `rooms` (in id order, at most `limit`), and whether more follow. A page
 * of 100 rooms with their outputs is tens of kilobytes: paid like a page of participants.
 */
export function roomsPage(call: Pick<ApiCall<string>, 'caller' | 'relay'>, rooms: RoomSummary[], more: boolean): RoomPage {
  spendBytes(call.caller, Buffer.byteLength(JSON.stringify(rooms)), call.relay);
  const last = rooms.at(-1);
  return { rooms, nextCursor: more && last !== undefined ? Buffer.from(last.roomId).toString('base64url') : null };
}

function listRooms(call: ApiCall<'rooms'>): RoomPage {
  const { limit, after } = roomsPageQuery(call.query);
  const ids = firstIdsAfter(call.relay.rooms.inProject(call.caller.project), after, limit + 1);
  return roomsPage(call, summariesHere(call.relay, call.caller.project, ids.slice(0, limit)), ids.length > limit);
}

/**
 * The `k` smallest room ids after `after`, in order, in O(n log k): ids are kept until there are
 * `2k`, then cut back to the `k` smallest, which bound what is kept after. Not a sort of every
 * room of the project at each call (10,000 rooms took 10–25 ms a page, whatever its size), nor an
 * insertion into a sorted list (ids in falling order made that n × k moves).
 */
export function firstIdsAfter(rooms: Iterable<{ id: string }>, after: string | null, k: number): string[] {
  const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  let kept: string[] = [];
  let bound: string | null = null;
  for (const { id } of rooms) {
    if ((after !== null && id <= after) || (bound !== null && id >= bound)) continue;
    kept.push(id);
    if (kept.length >= 2 * k) {
      kept = kept.sort(order).slice(0, k);
      bound = kept[k - 1]!;
    }
  }
  return kept.sort(order).slice(0, k);
}

function listParticipants(call: ApiCall<'rooms/:room/participants'>): ParticipantPage {
  const room = roomOf(call);
  const q = call.query;
  const limit = q.get('limit');
  const parsed = parseParams('participants.list', {
    tier: q.get('tier') ?? 'speaker',
    ...(limit === null ? {} : { limit: /^\d{1,7}$/.test(limit) ? Number(limit) : limit }),
    ...(q.get('cursor') === null ? {} : { cursor: q.get('cursor') }),
  });
  if (!parsed.ok) throw new RelayError('INVALID_ARGUMENT', parsed.problem, 'bad-query');
  const page = tierPage(room, parsed.value);
  spendBytes(call.caller, pageBytes(page), call.relay);
  return page;
}

function spendBytes(caller: Caller, bytes: number, relay: RelayContext): void {
  if (!caller.budget.bytes.take(bytes)) {
    const { dataByteRate, dataByteBurst } = relay.config;
    throw new RelayError('RATE_LIMITED', `at most ${dataByteRate} bytes of data per second per API key (burst ${dataByteBurst})`, 'byte-rate');
  }
}

function removeParticipant(call: ApiCall<'rooms/:room/participants/:participant'>): Record<string, never> {
  const room = roomOf(call);
  const target = room.get(call.params.participant);
  if (!target) throw new RelayError('NOT_FOUND', `no participant "${call.params.participant.slice(0, 128)}" in this room`, 'unknown-participant');
  removeMemberFor(call.relay, room, target, ADMIN_ACTOR);
  return {};
}

function endRoom(call: ApiCall<'rooms/:room'>): Record<string, never> {
  endRoomFor(call.relay, roomOf(call), ADMIN_ACTOR, (close) => close());
  return {};
}

function outputOf(name: string): OutputName {
  if (!(OUTPUTS as readonly string[]).includes(name)) throw new RelayError('NOT_FOUND', `no output "${name.slice(0, 64)}": one of ${OUTPUTS.join(', ')}`, 'unknown-route');
  return name as OutputName;
}

function startOutput(call: ApiCall<'rooms/:room/outputs/:output/start'>): Promise<OutputStatus> {
  const room = roomOf(call);
  const parsed = parseParams('output.start', { output: outputOf(call.params.output), ...(call.body.options === undefined ? {} : { options: call.body.options }) });
  if (!parsed.ok) throw new RelayError('INVALID_ARGUMENT', parsed.problem, 'bad-body');
  return room.outputs.start(parsed.value.output, ADMIN_ACTOR, parsed.value.options);
}

function stopOutput(call: ApiCall<'rooms/:room/outputs/:output/stop'>): Promise<OutputStatus> {
  return roomOf(call).outputs.stop(outputOf(call.params.output), ADMIN_ACTOR);
}

function publishData(call: ApiCall<'rooms/:room/data'>): PublishResult {
  const room = roomOf(call);
  const parsed = parseParams('pubsub.publish', call.body);
  if (!parsed.ok) throw new RelayError('INVALID_ARGUMENT', parsed.problem, 'bad-body');
  const { caller, relay } = call;
  return publishFrom(relay, room, { id: ADMIN_ACTOR, fanout: caller.budget.fanout }, parsed.value, (bytes) => spendBytes(caller, bytes, relay));
}

/**
 * The route of one recording's files. On a cluster it runs at the node that wrote them (as
 * downloads are served there), not at the room's home.
 */
export const RECORDING_ROUTE = 'rooms/:room/recordings/:recording';

function deleteRecording(call: ApiCall<typeof RECORDING_ROUTE>): Promise<Record<string, never>> {
  return deleteRecordingHere(call.relay, call.caller.project, call.params.room, call.params.recording);
}

/**
 * Where a route runs once its call is authorized and read: here (a single relay), or where its
 * room lives (a cluster node forwards it to the room's home).
 */
export type ApiRunner = (route: Route, call: ApiCall<string>) => Promise<unknown>;

/** Run every route on this relay. */
export const runHere: ApiRunner = async (route, call) => route.handle(call);

/** Every route of `/api/v1`. */
export const ROUTES: readonly Route[] = [
  route('GET', 'rooms', 'none', listRooms),
  route('GET', 'rooms/:room', 'none', (call) => summary(roomOf(call))),
  route('DELETE', 'rooms/:room', 'none', endRoom),
  route('GET', 'rooms/:room/participants', 'none', listParticipants),
  route('DELETE', 'rooms/:room/participants/:participant', 'none', removeParticipant),
  route('POST', 'rooms/:room/outputs/:output/start', 'json', startOutput),
  route('POST', 'rooms/:room/outputs/:output/stop', 'none', stopOutput),
  route('POST', 'rooms/:room/data', 'json', publishData),
  route('DELETE', RECORDING_ROUTE, 'none', deleteRecording),
];

/**
 * The routes whose path matches `segments` (any method), each with its parameters; empty when
 * no path matches.
 */
export function match(segments: readonly string[]): Array<{ route: Route; params: Record<string, string> }> {
  const found: Array<{ route: Route; params: Record<string, string> }> = [];
  for (const r of ROUTES) {
    const parts = r.path.split('/');
    if (parts.length !== segments.length) continue;
    const params: Record<string, string> = {};
    if (parts.every((part, i) => (part.startsWith(':') ? ((params[part.slice(1)] = segments[i]!), true) : part === segments[i]))) found.push({ route: r, params });
  }
  return found;
}
