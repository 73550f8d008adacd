import { wireError, type ErrorCode, type ErrorReason, type WireError } from '../src/protocol/codes.ts';

/** A refusal of a request, turned into a `response` frame with an error. */
export class RelayError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly reason?: ErrorReason,
  ) {
    super(message);
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
