/**
 * Who calls the server API: a server-API token of a project (`admin: true`, short-lived,
 * checked by `verifyAdminToken` like any token), and what its API key may still spend.
 */
import type { IncomingMessage } from 'node:http';
import type { RelayContext } from '../context.ts';
import { TokenBucket } from '../data/token-bucket.ts';
import { RelayError } from '../errors.ts';
import { verifyAdminToken } from '../token/verify.ts';
import { FanoutBudget } from '../data/fanout-budget.ts';

/** Longest `Authorization` header read; a token is far shorter. */
const MAX_AUTHORIZATION = 16 * 1024;

/** The token of `Authorization: Bearer <token>`, or `null`. */
export function bearer(req: IncomingMessage): string | null {
  const header = req.headers.authorization;
  if (typeof header !== 'string' || header.length > MAX_AUTHORIZATION) return null;
  const match = /^Bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i.exec(header);
  return match ? match[1]! : null;
}

/** What one API key may spend: requests, payload bytes, and the copies its messages make the relay send. */
export interface KeyBudget {
  readonly requests: TokenBucket;
  readonly bytes: TokenBucket;
  readonly fanout: FanoutBudget;
}

/** A caller the API accepted. */
export interface Caller {
  project: string;
  apiKey: string;
  budget: KeyBudget;
}

/**
 * The budgets of every API key that has called, made on its first call. Only keys of the keys
 * file get here (the token was verified first), so the map is as large as the keys file at most.
 */
export class ApiBudgets {
  private readonly byKey = new Map<string, KeyBudget>();

  constructor(private readonly relay: RelayContext) {}

  of(apiKey: string): KeyBudget {
    let budget = this.byKey.get(apiKey);
    if (!budget) {
      const c = this.relay.config;
      budget = {
        requests: new TokenBucket(c.apiRate, c.apiRate * 2),
        bytes: new TokenBucket(c.dataByteRate, c.dataByteBurst),
        fanout: new FanoutBudget(c),
      };
      this.byKey.set(apiKey, budget);
    }
    return budget;
  }
}

/**
 * Authorize a request: a server-API token in `Authorization`, then one request of its key's
 * rate. Throws the refusal as a `RelayError`.
 */
export function authorize(req: IncomingMessage, relay: RelayContext, budgets: ApiBudgets): Caller {
  const token = bearer(req);
  if (token === null) throw new RelayError('INVALID_TOKEN', 'send Authorization: Bearer <a server-API token>', 'missing');
  const { config } = relay;
  const verified = verifyAdminToken(token, { keys: relay.keys, maxTtl: config.maxTtlAdmin, leeway: config.tokenLeeway });
  if (!verified.ok) throw new RelayError(verified.code, verified.message, verified.reason);
  const budget = budgets.of(verified.apiKey);
  if (!budget.requests.take()) throw new RelayError('RATE_LIMITED', `at most ${config.apiRate} server-API requests per second per API key (burst ${config.apiRate * 2})`, 'api-rate');
  return { project: verified.project, apiKey: verified.apiKey, budget };
}
