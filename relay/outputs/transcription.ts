import type { OutputInfo, OutputOptions } from '../../src/protocol/control.ts';
import type { ServerFrame } from '../../src/protocol/messages.ts';
import type { Transcript, TranscriptionEngine } from '../../src/protocol/transcript.ts';
import { RelayError } from '../errors.ts';
import type { OutputContext, OutputProvider } from './board.ts';
import { requireFfmpeg, scratchDir, type ScratchDir } from './media-output.ts';
import { asrModel, checkAsr, DEFAULT_ASR_MODEL, localEngine } from './transcription/local-engine.ts';
import { Microphones } from './transcription/microphones.ts';
import type { RecogniserPool } from './transcription/pool.ts';
import type { RecogniserEngine, Utterance } from './transcription/recogniser.ts';
import { SERVICE_DEFAULTS, SpeechService } from './transcription/service-client.ts';
import { serviceEngine } from './transcription/service-engine.ts';

/** What the transcription output runs with. */
export interface TranscriptionSettings {
  /** The ffmpeg (`--ffmpeg`). */
  ffmpeg?: string;
  /** A `/v1/audio/transcriptions` service (`--transcription-url`): the default engine when set. */
  url?: string;
  /** The pocketsphinx model directory of the `local` engine (Debian's `pocketsphinx-en-us` by default). */
  asrModel?: string;
  /** The relay's recognisers (shared by every room). */
  pool: RecogniserPool;
}

/**
 * Live transcription of every published microphone: one recogniser per microphone (see
 * `transcription/`), each utterance sent as the room event `transcription` to the members whose
 * grant has `canSubscribeData`, and put in the room's timeline (the recording's `timeline.jsonl`,
 * the HLS subtitles). Active once the engine is ready, with or without a microphone on stage.
 */
export class TranscriptionProvider implements OutputProvider<'transcription'> {
  private microphones: Microphones | null = null;
  private service: SpeechService | null = null;
  private scratch: ScratchDir | null = null;
  /** Stopped, maybe while starting: a start still under way builds nothing more. */
  private stopped = false;

  constructor(
    private readonly ctx: OutputContext,
    private readonly settings: TranscriptionSettings,
  ) {}

  async start(options: OutputOptions['transcription'] | undefined): Promise<OutputInfo['transcription']> {
    const language = options?.language ?? 'en';
    const engine: TranscriptionEngine = options?.engine ?? (this.settings.url ? 'service' : 'local');
    if (engine === 'service' && !this.settings.url) {
      throw new RelayError('INVALID_ARGUMENT', 'no transcription service is configured on this relay (--transcription-url); the local engine needs none', 'not-configured');
    }
    const ffmpeg = requireFfmpeg(this.settings.ffmpeg);
    const recognise = await this.engine(engine, ffmpeg, language);
    const scratch = this.stopped ? null : await scratchDir('transcription');
    if (!scratch || this.stopped) {
      // stop() ran meanwhile, before any of this was here to stop
      this.service?.close();
      await scratch?.release();
      throw stoppedWhileStarting();
    }
    this.scratch = scratch;
    this.microphones = new Microphones({
      tap: (tap) => this.ctx.tapMedia(tap),
      pool: this.settings.pool,
      project: this.ctx.project,
      room: `${this.ctx.project}\u0000${this.ctx.roomId}`,
      engine: recognise,
      workDir: this.scratch.path,
      heard: (participantId, utterance) => this.heard(participantId, language, utterance),
      log: this.ctx.log,
    });
    this.microphones.start();
    return { language, engine };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.microphones?.stop();
    this.microphones = null;
    this.service?.close();
    await this.scratch?.release();
  }

  private async engine(engine: TranscriptionEngine, ffmpeg: string, language: string): Promise<RecogniserEngine> {
    if (engine === 'service') {
      this.service = new SpeechService({ url: this.settings.url!, ...SERVICE_DEFAULTS, log: this.ctx.log });
      return serviceEngine(ffmpeg, this.service, language);
    }
    const model = asrModel(this.settings.asrModel ?? DEFAULT_ASR_MODEL, language);
    await checkAsr(ffmpeg, model);
    return localEngine(ffmpeg, model);
  }

  private heard(participantId: string, language: string, { text, startedAt, endedAt }: Utterance): void {
    if (!text) return;
    const transcript: Transcript = { participantId, text, final: true, language, startedAt, endedAt };
    const frame: ServerFrame = { type: 'event', name: 'transcription', data: transcript };
    this.ctx.broadcastSplit(frame, null, (member) => member.grant.canSubscribeData);
    this.ctx.timeline.emit({ type: 'transcription', ...transcript });
  }
}

const stoppedWhileStarting = () => new RelayError('INVALID_STATE', 'transcription was stopped while starting', 'output-stopped');
