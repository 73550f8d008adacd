/** Wire types of live transcription (the `transcription` output's results). */

/** How the relay recognises speech: ffmpeg's `asr` on the relay (`local`), or a `/v1/audio/transcriptions` service (`service`). */
export type TranscriptionEngine = 'local' | 'service';

/** Every engine, in a fixed order. */
export const TRANSCRIPTION_ENGINES: readonly TranscriptionEngine[] = Object.freeze(['local', 'service']);

/** One utterance of one microphone, recognised. */
export interface Transcript {
  /** Whose microphone it was. */
  participantId: string;
  /** What was recognised (may be empty when the recogniser heard speech but no words). */
  text: string;
  /** `true`: the recogniser's last word on this utterance (today's engines send only final results). */
  final: boolean;
  /** The language it was recognised as (the output's `language`, a BCP 47 tag). */
  language: string;
  /** Unix milliseconds at which the utterance began, by the relay's clock (when its audio reached the relay). */
  startedAt: number;
  /** Unix milliseconds at which the utterance ended, by the relay's clock. */
  endedAt: number;
}

/** Events of this part of the protocol. */
export interface TranscriptEvents {
  /** To members with `canSubscribeData`: an utterance was recognised. */
  transcription: Transcript;
}
