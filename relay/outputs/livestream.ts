import type { WireError } from '../../src/protocol/messages.ts';
import { RelayError } from '../context.ts';
import type { TimedEvent } from '../rooms/timeline.ts';
import type { OutputContext, OutputProvider } from './board.ts';
import { parseRtmpUrl, RtmpPublisher } from './rtmp.ts';

/**
 * RTMP livestream: publishes a stream to the `url` given to `start({ url })`
 * (`rtmp://host[:port]/app/streamKey`), with `onMetaData` and the room's timeline as
 * `onTextData` messages. Audio and video join the stream when the relay forwards media.
 * A server that drops the connection puts the output in `failed`.
 */
export class LivestreamProvider implements OutputProvider {
  private publisher: RtmpPublisher | null = null;
  private off: (() => void) | null = null;

  constructor(
    private readonly ctx: OutputContext,
    private readonly failed: (error: WireError) => void,
  ) {}

  async start(options: Record<string, unknown>): Promise<Record<string, string>> {
    const url = options.url;
    if (typeof url !== 'string' || !parseRtmpUrl(url)) {
      throw new RelayError('INVALID_ARGUMENT', 'livestream.start needs { url: "rtmp://host[:port]/app/streamKey" }', 'bad-url');
    }
    const publisher = new RtmpPublisher();
    try {
      await publisher.connect(url);
    } catch (err) {
      throw new RelayError('CONNECTION_FAILED', `RTMP: ${(err as Error).message}`, 'rtmp-failed');
    }
    publisher.onClose = (error) =>
      this.failed({ code: 'CONNECTION_LOST', message: `the RTMP server closed the stream${error ? `: ${error.message}` : ''}`, reason: 'rtmp-closed' });
    publisher.data(['@setDataFrame', 'onMetaData', { encoder: 'tessera', room: this.ctx.roomId, hasAudio: false, hasVideo: false }]);
    this.off = this.ctx.timeline.on((e: TimedEvent) => publisher.data(['onTextData', { type: 'Text', text: JSON.stringify(e) }]));
    this.publisher = publisher;
    const target = parseRtmpUrl(url)!;
    return { server: target.tcUrl, key: `${target.key.slice(0, 2)}…` };
  }

  async stop(): Promise<void> {
    this.off?.();
    this.off = null;
    await this.publisher?.close();
    this.publisher = null;
  }
}
