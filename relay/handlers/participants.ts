import type { Tier } from '../../src/protocol/messages.ts';
import type { Params, Result } from '../../src/protocol/messages.ts';
import { spendBytes, type RequestScope } from '../context.ts';
import { jsonStringBytes } from '../data/json-bytes.ts';
import { RelayError } from '../errors.ts';
import type { Room, TierCursor } from '../rooms/types.ts';

/** Default page size of `participants.list`. */
export const DEFAULT_PAGE = 100;

/**
 * Cursors are positions (a tier and a join sequence number), written as an opaque string. The
 * relay keeps nothing per cursor: a forged one only names another position in a list the
 * caller may page through anyway.
 */
export function encodeCursor(cursor: TierCursor): string {
  return Buffer.from(`${cursor.tier === 'viewer' ? 'v' : 's'}${cursor.position.toString(36)}`).toString('base64url');
}

export function decodeCursor(text: string): TierCursor | null {
  const m = /^([vs])([0-9a-z]{1,11})$/.exec(Buffer.from(text, 'base64url').toString('latin1'));
  if (!m) return null;
  const position = parseInt(m[2]!, 36);
  if (!Number.isSafeInteger(position)) return null;
  const tier: Tier = m[1] === 'v' ? 'viewer' : 'speaker';
  return { tier, position };
}

/** One page of a tier of a room, in join order, whoever asks (a member, the server API). */
export function tierPage(room: Room, params: Params<'participants.list'>): Result<'participants.list'> {
  let after: TierCursor | null = null;
  if (params.cursor !== undefined && params.cursor !== null) {
    const found = decodeCursor(params.cursor);
    if (!found) throw new RelayError('INVALID_ARGUMENT', 'unknown cursor: start the walk again without one', 'bad-cursor');
    if (found.tier !== params.tier) throw new RelayError('INVALID_ARGUMENT', 'this cursor belongs to a walk over another tier', 'bad-cursor');
    after = found;
  }
  const page = room.page(params.tier, after, params.limit ?? DEFAULT_PAGE);
  return { participants: page.participants, nextCursor: page.next ? encodeCursor(page.next) : null };
}

/** What a page costs to send (its ids and names as the answer writes them): a page of 1,000 is hundreds of kilobytes. */
export function pageBytes(page: Result<'participants.list'>): number {
  let bytes = 0;
  for (const p of page.participants) bytes += jsonStringBytes(p.id) + jsonStringBytes(p.name) + 64;
  return bytes;
}

/** `participants.list`: one page of a tier, in join order; the asker's byte budget pays for it. */
export function listParticipants(scope: RequestScope, params: Params<'participants.list'>): Result<'participants.list'> {
  const page = tierPage(scope.room, params);
  spendBytes(scope, pageBytes(page));
  return page;
}
