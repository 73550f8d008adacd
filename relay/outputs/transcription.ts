import type { OutputInfo, OutputOptions } from '../../src/protocol/control.ts';
import { RelayError } from '../errors.ts';
import type { OutputContext, OutputProvider } from './board.ts';

/**
 * Transcription through an external service: the relay runs the state machine and tells the
 * service, by HTTP POST of JSON to `--transcription-url`, when a room's transcription starts
 * and stops (`{ type: 'start' | 'stop', roomId, by, at }`; a 2xx answer accepts). Audio is
 * forwarded to the service once the relay forwards media. Without a URL, start fails with a
 * clear error (`not-configured`) and the output goes to `failed`.
 */
export class TranscriptionProvider implements OutputProvider {
  constructor(
    private readonly ctx: OutputContext,
    private readonly url: string | undefined,
  ) {}

  private async post(type: 'start' | 'stop', extra: Record<string, unknown> = {}): Promise<void> {
    if (!this.url) {
      throw new RelayError('INVALID_ARGUMENT', 'no transcription service is configured on this relay (--transcription-url)', 'not-configured');
    }
    let res: Response;
    try {
      res = await fetch(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type, roomId: this.ctx.roomId, at: Date.now(), ...extra }),
        signal: AbortSignal.timeout(5000),
      });
    } catch (err) {
      throw new RelayError('CONNECTION_FAILED', `the transcription service cannot be reached: ${(err as Error).message}`, 'unreachable');
    }
    if (!res.ok) throw new RelayError('CONNECTION_FAILED', `the transcription service answered ${res.status}`, 'refused');
  }

  async start(options: OutputOptions['transcription'] | undefined): Promise<OutputInfo['transcription']> {
    const language = options?.language ?? 'en';
    await this.post('start', { language });
    return { language };
  }

  async stop(): Promise<void> {
    await this.post('stop').catch((err: RelayError) => this.ctx.log.warn(`transcription stop not delivered: ${err.message}`));
  }
}
