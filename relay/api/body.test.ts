import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { readBody } from './body.ts';

/** A request of `headers` whose body is `body`. */
function requestOf(headers: Record<string, string>, body = ''): IncomingMessage {
  return Object.assign(Readable.from(body === '' ? [] : [Buffer.from(body)]), { method: 'POST', headers }) as unknown as IncomingMessage;
}

describe('server API bodies', () => {
  it('a length of zero, however many zeros spell it, is no body: {} for a JSON route, accepted by a route without one', async () => {
    for (const length of ['0', '00', '000']) {
      assert.deepEqual(await readBody(requestOf({ 'content-length': length }), 'json', 1024, 1000), {}, length);
      assert.deepEqual(await readBody(requestOf({ 'content-length': length }), 'none', 1024, 1000), {}, length);
    }
  });

  it('a body where none is taken is refused; a JSON body is read', async () => {
    await assert.rejects(readBody(requestOf({ 'content-length': '2' }, '{}'), 'none', 1024, 1000), { code: 'INVALID_ARGUMENT' });
    assert.deepEqual(await readBody(requestOf({ 'content-length': '7', 'content-type': 'application/json' }, '{"a":1}'), 'json', 1024, 1000), { a: 1 });
  });
});
