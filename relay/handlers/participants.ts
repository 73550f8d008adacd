import type { Params, Result } from '../../src/protocol/messages.ts';
import { RelayError, type RequestScope } from '../context.ts';
import type { TierCursor } from '../rooms/types.ts';

/** Default and largest page sizes of `participants.list`. */
export const DEFAULT_PAGE = 100;

/** `participants.list`: one page of a tier, in join order. */
export function listParticipants(scope: RequestScope, params: Params<'participants.list'>): Result<'participants.list'> {
  let after: TierCursor | null = null;
  if (params.cursor !== undefined && params.cursor !== null) {
    const found = scope.cursors.get(params.cursor) as TierCursor | undefined;
    if (!found) throw new RelayError('INVALID_ARGUMENT', 'unknown or expired cursor: start the walk again without one', 'bad-cursor');
    if (found.tier !== params.tier) throw new RelayError('INVALID_ARGUMENT', 'this cursor belongs to a walk over another tier', 'bad-cursor');
    after = found;
  }
  const page = scope.room.page(params.tier, after, params.limit ?? DEFAULT_PAGE);
  return { participants: page.participants, nextCursor: page.next ? scope.cursors.put(page.next) : null };
}
