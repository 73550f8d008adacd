import { wireError, type ErrorCode, type ErrorReason, type WireError } from '../src/protocol/codes.ts';

/**
 * A refusal of a request, turned into a `response` frame with an error. Refusals are the
 * relay's expected answers (a flooder gets thousands a second), not faults: no stack trace is
 * captured for them, which took 7 % of the relay's time under the hostile benchmark.
 */
export class RelayError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly reason?: ErrorReason,
  ) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(message);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }

  toWire(): WireError {
    return wireError(this.code, this.message, this.reason);
  }
}

/**
 * The wire form of anything a request handler threw: a refusal as it was made, anything else
 * as the relay's own fault (`INTERNAL_ERROR`), never as a fault of the caller's call.
 */
export function toWireError(err: unknown): WireError {
  return err instanceof RelayError ? err.toWire() : wireError('INTERNAL_ERROR', 'the relay could not complete this request', 'internal');
}
