import type { OutputInfo, OutputOptions } from '../../src/protocol/control.ts';
import type { WireError } from '../../src/protocol/messages.ts';
import { RelayError } from '../errors.ts';
import type { TimedEvent } from '../rooms/timeline.ts';
import type { OutputContext, OutputProvider } from './board.ts';
import { RtmpPublisher } from './rtmp.ts';
import { parseRtmpUrl, PrivateTargetError, resolveTarget } from './rtmp-target.ts';

/** What the relay's configuration decides for livestreams. */
export interface LivestreamSettings {
  /** Let targets be loopback, private or link-local addresses (`--allow-private-rtmp`). */
  allowPrivateRtmp: boolean;
  /** The longest a publish may take (the board's start deadline is the one callers see). */
  deadlineMs: number;
}

/**
 * One message for every failure to reach or publish to the server: a refused port, a reset,
 * a TLS error, a server speaking another protocol, a broken RTMP server. Saying more would make
 * `livestream.start` a port scanner of whatever the relay can reach.
 */
const FAILED = 'the RTMP server could not be reached or did not accept the stream';

/**
 * RTMP livestream: publishes a stream to the `url` given to `start({ url })`
 * (`rtmp[s]://host[:port]/app/streamKey`), with `onMetaData` and the room's timeline as
 * `onTextData` messages. Audio and video join the stream when the relay forwards media.
 * The host must resolve to public addresses only (else `private-target`), unless the relay
 * allows private targets. A server that drops the connection puts the output in `failed`.
 */
export class LivestreamProvider implements OutputProvider {
  private publisher: RtmpPublisher | null = null;
  private off: (() => void) | null = null;
  private stopped = false;

  constructor(
    private readonly ctx: OutputContext,
    private readonly failed: (error: WireError) => void,
    private readonly settings: LivestreamSettings,
  ) {}

  async start(options: OutputOptions['livestream'] | undefined): Promise<OutputInfo['livestream']> {
    const target = options ? parseRtmpUrl(options.url) : null;
    if (!target) {
      throw new RelayError('INVALID_ARGUMENT', 'livestream.start needs { url: "rtmp[s]://host[:port]/app/streamKey" }', 'bad-url');
    }
    let address: string;
    try {
      ({ address } = await resolveTarget(target.host, this.settings.allowPrivateRtmp));
    } catch (err) {
      if (err instanceof PrivateTargetError) {
        throw new RelayError('INVALID_ARGUMENT', 'livestream targets must be public addresses: this relay does not stream to loopback, private or link-local ones', 'private-target');
      }
      throw this.failure(err);
    }
    if (this.stopped) throw new RelayError('INVALID_STATE', 'livestream was stopped while starting', 'output-stopped');
    const publisher = new RtmpPublisher();
    this.publisher = publisher;
    try {
      await publisher.publish(target, address, this.settings.deadlineMs);
    } catch (err) {
      throw this.failure(err);
    }
    publisher.onClose = () => this.failed({ code: 'CONNECTION_LOST', kind: 'Network', message: 'the RTMP server closed the stream', reason: 'rtmp-closed' });
    publisher.data(['@setDataFrame', 'onMetaData', { encoder: 'tessera', room: this.ctx.roomId, hasAudio: false, hasVideo: false }]);
    this.off = this.ctx.timeline.on((e: TimedEvent) => publisher.data(['onTextData', { type: 'Text', text: JSON.stringify(e) }]));
    return { server: target.tcUrl, key: `${target.key.slice(0, 2)}…` };
  }

  /** Ends the stream, or cancels a start in progress (its connection is dropped). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.off?.();
    this.off = null;
    const publisher = this.publisher;
    this.publisher = null;
    await publisher?.close();
  }

  /** The caller's error says only that it failed; the log keeps the detail (this relay's words, not the server's). */
  private failure(err: unknown): RelayError {
    this.ctx.log.info('livestream could not start', { project: this.ctx.project, room: this.ctx.roomId, detail: (err as Error).message });
    return new RelayError('CONNECTION_FAILED', FAILED, 'rtmp-failed');
  }
}
