/**
 * TLS for `rtmps://` livestreams, done by the relay rather than by ffmpeg: ffmpeg must connect
 * to the address the relay checked (never resolve the name again: DNS rebinding), and given an
 * IP address ffmpeg's TLS sends no SNI, which CDN ingest servers need to pick their certificate.
 * So ffmpeg speaks plain RTMP to a loopback port of the relay, and the relay carries those bytes
 * over TLS to the checked address, with the name as SNI and the certificate verified against it
 * (Node's CA store, or `ca`). The relay only moves bytes: it parses nothing the server sends.
 */
import { createServer, isIP, type Socket } from 'node:net';
import { checkServerIdentity, connect as tlsConnect } from 'node:tls';

export interface TlsTunnelOptions {
  /** The checked address to connect to. */
  address: string;
  port: number;
  /** The host as the caller wrote it: SNI and the name the certificate must carry. */
  host: string;
  /** CA certificates (PEM) to trust instead of Node's store. */
  ca?: string;
  /** What went wrong, for the relay's log. */
  onError(detail: string): void;
}

export interface TlsTunnel {
  /** The loopback port ffmpeg connects to. */
  readonly port: number;
  close(): void;
}

/**
 * Listen on a loopback port for one connection (ffmpeg's) and carry it over TLS. The port takes
 * no second connection.
 */
export async function startTlsTunnel(options: TlsTunnelOptions): Promise<TlsTunnel> {
  const sockets: Socket[] = [];
  const server = createServer({ pauseOnConnect: true }, (local) => {
    server.close();
    sockets.push(local);
    const remote = tlsConnect({
      host: options.address,
      port: options.port,
      ...(isIP(options.host) ? {} : { servername: options.host }),
      // the certificate is checked against the name as written, not the address connected to
      checkServerIdentity: (_address, cert) => checkServerIdentity(options.host, cert),
      ...(options.ca ? { ca: options.ca } : {}),
    });
    sockets.push(remote);
    const fail = (what: string) => (err: Error) => {
      options.onError(`${what}: ${err.message}`);
      local.destroy();
      remote.destroy();
    };
    local.on('error', fail('local'));
    remote.on('error', fail('TLS'));
    local.on('close', () => remote.destroy());
    remote.on('close', () => local.destroy());
    remote.once('secureConnect', () => {
      local.pipe(remote);
      remote.pipe(local);
      local.resume();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  // an accept that fails later (out of file descriptors) is ffmpeg's connection failing, never an unhandled 'error'
  server.on('error', (err) => options.onError(`local: ${err.message}`));
  return {
    port: (server.address() as { port: number }).port,
    close: () => {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
}
