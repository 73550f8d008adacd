import { join } from 'node:path';
import type { OutputInfo, OutputOptions } from '../../src/protocol/control.ts';
import { wireError } from '../../src/protocol/codes.ts';
import type { WireError } from '../../src/protocol/messages.ts';
import { RelayError } from '../errors.ts';
import type { OutputContext, OutputProvider } from './board.ts';
import type { CompositeRun } from './ffmpeg/composite-run.ts';
import { requireFfmpeg, roomComposite, scratchDir, type CompositeSize, type ScratchDir } from './media-output.ts';
import { RtmpPush, shortKey, type PushTarget } from './rtmp-push.ts';
import { startTlsTunnel, type TlsTunnel } from './rtmps-tunnel.ts';
import { parseRtmpUrl, PrivateTargetError, resolveTarget, type RtmpTarget } from './rtmp-target.ts';

/** What the relay's configuration decides for livestreams. */
export interface LivestreamSettings {
  /** Let targets be loopback, private or link-local addresses (`--allow-private-rtmp`). */
  allowPrivateRtmp: boolean;
  /** The board's start deadline (ms): the provider gives up a little before it, with its own reason. */
  deadlineMs: number;
  /** The ffmpeg to run (`--ffmpeg`). */
  ffmpeg?: string;
  /** The composite's picture (`--composite`). */
  size?: CompositeSize;
  /** CA certificates (PEM) trusted for `rtmps://` instead of Node's store (tests, private CAs). */
  tlsCa?: string;
}

/**
 * One message for every failure to reach or publish to the server: a refused port, a reset,
 * a TLS error, a server speaking another protocol, a broken or silent RTMP server. Saying more
 * would make `livestream.start` a port scanner of whatever the relay can reach.
 */
const FAILED = 'the RTMP server could not be reached or did not accept the stream';

/** How long one read or write to the server may block once streaming (a server that stops reading). */
const IO_TIMEOUT_MS = 10_000;

/** `host` as it goes in a URL (IPv6 in brackets). */
const urlHost = (address: string) => (address.includes(':') ? `[${address}]` : address);

/**
 * RTMP livestream: the room's stage composite (H.264 + AAC in FLV) pushed by ffmpeg to the
 * `url` given to `start({ url })` (`rtmp[s]://host[:port]/app/streamKey`). The composite's
 * runs write MPEG-TS into one long-lived pusher (see `rtmp-push.ts`), so stage changes never
 * drop the RTMP connection. The host must resolve to public addresses only (else
 * `private-target`), unless the relay allows private targets; ffmpeg connects to the address
 * that was checked. `start` resolves once media reaches the server; a server that closes the
 * stream later puts the output in `failed` (`rtmp-closed`, with ffmpeg's words).
 */
export class LivestreamProvider implements OutputProvider<'livestream'> {
  private work: ScratchDir | null = null;
  private tunnel: TlsTunnel | null = null;
  private push: RtmpPush | null = null;
  private composite: CompositeRun | null = null;
  private stopping: Promise<void> | null = null;

  constructor(
    private readonly ctx: OutputContext,
    private readonly failed: (error: WireError) => void,
    private readonly settings: LivestreamSettings,
  ) {}

  /** How many composite runs have fed this stream (each stage change starts one). */
  get runs(): number {
    return this.composite?.runs ?? 0;
  }

  /** Seconds of stream pushed to the server so far. */
  get pushedSeconds(): number {
    return this.push?.seconds ?? 0;
  }

  async start(options: OutputOptions['livestream'] | undefined): Promise<OutputInfo['livestream']> {
    const target = options ? parseRtmpUrl(options.url) : null;
    if (!target) {
      throw new RelayError('INVALID_ARGUMENT', 'livestream.start needs { url: "rtmp[s]://host[:port]/app/streamKey" }', 'bad-url');
    }
    const ffmpeg = requireFfmpeg(this.settings.ffmpeg);
    let address: string;
    try {
      ({ address } = await resolveTarget(target.host, this.settings.allowPrivateRtmp));
    } catch (err) {
      if (err instanceof PrivateTargetError) {
        throw new RelayError('INVALID_ARGUMENT', 'livestream targets must be public addresses: this relay does not stream to loopback, private or link-local ones', 'private-target');
      }
      throw this.unreachable((err as Error).message);
    }
    try {
      await this.begin(ffmpeg, target, address);
    } catch (err) {
      // a start that fails leaves nothing running (the board stops only what started); what was
      // made after a stop began is released by the second call
      await this.stop();
      await this.release();
      throw err;
    }
    return { server: target.tcUrl, key: shortKey(target.key) };
  }

  private async begin(ffmpeg: string, target: RtmpTarget, address: string): Promise<void> {
    const deadline = Date.now() + Math.max(this.settings.deadlineMs - 1000, this.settings.deadlineMs * 0.8);
    this.work = await scratchDir('livestream');
    this.checkNotStopped();
    let to = `${urlHost(address)}:${target.port}`;
    if (target.secure) {
      this.tunnel = await startTlsTunnel({
        address,
        port: target.port,
        host: target.host,
        ...(this.settings.tlsCa ? { ca: this.settings.tlsCa } : {}),
        onError: (detail) => this.ctx.log.info('livestream TLS', { project: this.ctx.project, room: this.ctx.roomId, detail }),
      });
      to = `127.0.0.1:${this.tunnel.port}`;
    }
    const pushTarget: PushTarget = { url: `rtmp://${to}/${target.app}/${target.key}`, tcUrl: target.tcUrl, app: target.app, key: target.key };
    this.push = await RtmpPush.start({
      ffmpeg,
      workDir: this.work.path,
      target: pushTarget,
      // before the stream flows this bounds a silent server's handshake too
      ioTimeoutMs: Math.min(IO_TIMEOUT_MS, Math.max(500, deadline - Date.now())),
      log: this.ctx.log,
    });
    const push = this.push;
    this.checkNotStopped();
    let compositeFailed!: (reason: string) => void;
    const compositeFailure = new Promise<string>((resolve) => (compositeFailed = resolve));
    const composite = roomComposite(
      this.ctx,
      { ffmpeg, workDir: join(this.work.path, 'composite'), ...(this.settings.size ? { size: this.settings.size } : {}) },
      // each run continues the pipe the pusher reads (`-y`: the pipe exists)
      () => ['-f', 'mpegts', '-y', push.input],
      (reason) => {
        compositeFailed(reason);
        this.failed(wireError('INTERNAL_ERROR', `livestream: ${reason}`, 'ffmpeg-failed'));
      },
    );
    this.composite = composite;
    await composite.start();
    this.checkNotStopped();
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      push.flowing.then(() => ({ ok: true as const })),
      push.exited.then((exit) => ({ ok: false as const, why: exit.reason })),
      compositeFailure.then((reason) => ({ ok: false as const, composite: reason })),
      new Promise<{ ok: false; why: string }>((resolve) => (timer = setTimeout(() => resolve({ ok: false, why: `no media reached the server within the deadline (composite wrote ${composite.seconds.toFixed(1)} s)` }), Math.max(0, deadline - Date.now())))),
    ]);
    clearTimeout(timer);
    this.checkNotStopped();
    if (!outcome.ok) {
      if ('composite' in outcome) throw new RelayError('INTERNAL_ERROR', `livestream: ${outcome.composite}`, 'ffmpeg-failed');
      throw this.unreachable(outcome.why);
    }
    void push.exited.then((exit) => {
      if (this.stopping || exit.stopped) return;
      this.ctx.log.warn('livestream ended by the server', { project: this.ctx.project, room: this.ctx.roomId, detail: exit.reason });
      // the stream was accepted: what ffmpeg says now is about that server, not a probe of the network
      this.failed(wireError('CONNECTION_LOST', `the RTMP server closed the stream: ${exit.reason}`, 'rtmp-closed'));
    });
  }

  /** Ends the stream (the composite's last run, then the pusher, which closes the connection), or cancels a start. */
  stop(): Promise<void> {
    this.stopping ??= this.release();
    return this.stopping;
  }

  /** Stop and let go of whatever runs now. */
  private async release(): Promise<void> {
    const { composite, push, tunnel, work } = this;
    this.composite = null;
    this.push = null;
    this.tunnel = null;
    this.work = null;
    // a pusher that is gone reads no more: the runs writing to it must not block on the pipe
    if (push) void push.exited.then(() => push.endInput());
    await composite?.stop();
    await push?.stop();
    tunnel?.close();
    await work?.release();
  }

  private checkNotStopped(): void {
    if (this.stopping) throw new RelayError('INVALID_STATE', 'livestream was stopped while starting', 'output-stopped');
  }

  /** The caller's error says only that it failed; the log keeps the detail (never the stream key). */
  private unreachable(detail: string): RelayError {
    this.ctx.log.info('livestream could not start', { project: this.ctx.project, room: this.ctx.roomId, detail });
    return new RelayError('CONNECTION_FAILED', FAILED, 'rtmp-failed');
  }
}
