import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorKind } from '../src/protocol/codes.ts';
import { RelayError, toWireError } from './errors.ts';

describe('relay errors on the wire (issue 12)', () => {
  it('a relay fault is INTERNAL_ERROR, never INVALID_ARGUMENT (which tells the caller to fix the call)', () => {
    const wire = toWireError(new TypeError('x is undefined'));
    assert.equal(wire.code, 'INTERNAL_ERROR');
    assert.equal(wire.reason, 'internal');
    assert.equal(wire.kind, ErrorKind.Network);
    assert.doesNotMatch(wire.message, /undefined/, 'the fault itself stays in the log');
    const refusal = toWireError(new RelayError('RATE_LIMITED', 'slow down', 'message-rate'));
    assert.deepEqual(refusal, { code: 'RATE_LIMITED', kind: 'Request', message: 'slow down', reason: 'message-rate' });
  });

});
