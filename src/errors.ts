import { kindOf, type ErrorCode, type ErrorKind } from './protocol/codes.ts';
import type { WireError } from './protocol/messages.ts';

/**
 * The one error class of Tessera. Test `kind` to catch a whole class of failures and branch
 * on `code` for specifics; `reason` is a machine-readable detail (e.g. `expired`).
 *
 * @example
 * ```ts
 * try {
 *   const room = await Sdk.join({ url, token });
 * } catch (err) {
 *   if (err instanceof SdkError && err.kind === ErrorKind.Auth) {
 *     if (err.code === ErrorCode.INVALID_TOKEN && err.reason === 'expired') return renewToken();
 *     return showError(err.message);
 *   }
 *   throw err;
 * }
 * ```
 */
export class SdkError extends Error {
  override readonly name = 'SdkError';
  /** The class of the failure. */
  readonly kind: ErrorKind;
  /** The precise failure; see `docs/errors.md`. */
  readonly code: ErrorCode;
  /** A machine-readable detail, when the relay gave one. */
  readonly reason?: string;

  constructor(code: ErrorCode, message: string, options: { reason?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.kind = kindOf(code);
    if (options.reason !== undefined) this.reason = options.reason;
  }

  /** Build an error from the relay's wire form. */
  static fromWire(error: WireError): SdkError {
    return new SdkError(error.code, error.message, error.reason === undefined ? {} : { reason: error.reason });
  }
}
