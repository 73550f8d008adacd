/** Small parsing helpers shared by the frame validators. */
import type { Method, Params } from './messages.ts';
import { idControl, isWellFormed, MAX_ID_LENGTH } from './text.ts';

/**
 * The outcome of a parse: a typed value, or a human-readable problem (`id`: of the request a
 * malformed response answers; `unknown`: the frame is of a type this SDK does not know, which a
 * newer peer may send).
 */
export type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string; id?: number; unknown?: true };

export const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
export const bad = (problem: string, id?: number): Parsed<never> =>
  id === undefined ? { ok: false, problem } : { ok: false, problem, id };

/** True for a plain JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export { MAX_ID_LENGTH };
/** Display names are bounded too. */
export const MAX_NAME_LENGTH = 256;

export function optionalString(value: unknown, max: number): boolean {
  return value === undefined || (typeof value === 'string' && value.length > 0 && value.length <= max);
}

/**
 * A participant or room id (and the ids of lists and subscriptions): a non-empty, well-formed
 * string of at most {@link MAX_ID_LENGTH} characters without control or bidi control characters
 * (`idControl`).
 */
export function isId(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_ID_LENGTH && isWellFormed(value) && idControl(value) === null;
}

/** A parser of one method's parameters. */
export type ParamsParser<M extends Method> = (params: Record<string, unknown>) => Parsed<Params<M>>;
