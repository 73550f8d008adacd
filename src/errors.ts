import { ErrorKind, isErrorCode, isErrorKind, isErrorReason, kindOf, type ErrorCode, type ErrorReason } from './protocol/codes.ts';

/**
 * A code this SDK knows ({@link ErrorCode}), or one a newer relay sent that it does not: such
 * a code keeps its string, and its `kind` still says what class of failure it is.
 */
export type AnyErrorCode = ErrorCode | (string & {});

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
  /** The precise failure; see `docs/errors.md`. A code from a newer relay keeps its string. */
  readonly code: AnyErrorCode;
  /** A machine-readable detail, when there is one (see `docs/errors.md`). */
  readonly reason?: ErrorReason;

  /**
   * @param code a known code; a code from a newer relay takes `options.kind` (`Request` without one)
   */
  constructor(code: AnyErrorCode, message: string, options: { reason?: ErrorReason; cause?: unknown; kind?: ErrorKind } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.kind = isErrorCode(code) ? kindOf(code) : (options.kind ?? ErrorKind.Request);
    if (options.reason !== undefined) this.reason = options.reason;
  }

  /**
   * Build an error from the relay's wire form. A code this SDK does not know keeps its string
   * and takes the kind the relay sent with it; a reason it does not know is left out.
   */
  static fromWire(error: { code: string; message: string; reason?: string; kind?: string }): SdkError {
    return new SdkError(error.code, error.message, {
      ...(isErrorReason(error.reason) ? { reason: error.reason } : {}),
      ...(isErrorKind(error.kind) ? { kind: error.kind } : {}),
    });
  }
}
