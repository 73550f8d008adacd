import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UdpTransport } from 'werift';
import { checkMediaIp, installUdpErrorHandling } from './udp-errors.ts';

/** An address of no host here (TEST-NET-2, RFC 5737). */
const FOREIGN = '198.51.100.7';

/** Resolves with the first uncaught exception or unhandled rejection within `ms`, else null. */
function escaped(ms: number): Promise<unknown> {
  return new Promise((resolve) => {
    const seen = (error: unknown) => done(error);
    const timer = setTimeout(() => done(null), ms);
    function done(value: unknown) {
      clearTimeout(timer);
      process.off('unhandledRejection', seen);
      process.off('uncaughtException', seen);
      resolve(value);
    }
    process.on('unhandledRejection', seen);
    process.on('uncaughtException', seen);
  });
}

describe("werift's UDP sockets: an error is never an uncaught 'error' event", () => {
  installUdpErrorHandling();

  it("a bind to an address not on this host fails the transport's start (it was an 'error' event with no listener: the process ended, and the start waited for ever)", async () => {
    const watch = escaped(300);
    const outcome = await Promise.race([
      UdpTransport.init('udp4', { interfaceAddresses: { udp4: FOREIGN } } as never).then(
        () => 'bound',
        (e: NodeJS.ErrnoException) => e.code,
      ),
      new Promise((r) => setTimeout(() => r('no answer'), 2000)),
    ]);
    assert.equal(outcome, 'EADDRNOTAVAIL');
    assert.equal(await watch, null, 'nothing escaped');
  });

  it('an error on a bound socket (a send that failed) is a lost datagram', async () => {
    const transport = await UdpTransport.init('udp4', { interfaceAddresses: { udp4: '127.0.0.1' } } as never);
    const watch = escaped(100);
    (transport as unknown as { socket: { emit(e: string, v: unknown): void } }).socket.emit('error', new Error('send EPERM'));
    assert.equal(await watch, null);
    await transport.close();
  });

  it('the relay checks at its start that it can receive media on --media-ip', async () => {
    await checkMediaIp('127.0.0.1');
    await assert.rejects(checkMediaIp(FOREIGN), /--media-ip 198\.51\.100\.7 is not an address of this host \(EADDRNOTAVAIL\)/);
  });
});
