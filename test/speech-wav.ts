/**
 * Speech to test transcription with: a WAV that espeak-ng writes, with two seconds of silence
 * after the sentence (speech recognisers end an utterance on silence). Made once per test
 * process, removed at exit. Chromium's fake microphone plays it (test-e2e/media/speech.ts), and
 * so can a publisher in Node (`realTrack('audio', { file })` of test/real-media.ts).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What the speech says. Words pocketsphinx recognises well even from a synthetic voice. */
export const SPEECH = 'hello world this is a test of the transcription';

/**
 * espeak-ng's American English voice a little slower than its default (175 words a minute): of
 * the voices and speeds tried through Opus, the one whose words pocketsphinx gets most often.
 */
const VOICE = ['-v', 'en-us', '-s', '150'];

/** Seconds of silence after the sentence. */
export const TRAILING_SILENCE_S = 2;

let made: { wav: string; speechSeconds: number } | null = null;

function make(): { wav: string; speechSeconds: number } {
  if (made) return made;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-speech-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const raw = join(dir, 'raw.wav');
  const wav = join(dir, 'speech.wav');
  execFileSync('espeak-ng', [...VOICE, '-w', raw, SPEECH]);
  execFileSync('ffmpeg', ['-loglevel', 'error', '-y', '-i', raw, '-af', `apad=pad_dur=${TRAILING_SILENCE_S}`, '-ar', '48000', '-ac', '1', '-c:a', 'pcm_s16le', wav]);
  const speechSeconds = Number(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', raw]).toString());
  made = { wav, speechSeconds };
  return made;
}

/** The speech WAV (16-bit mono PCM, 48 kHz): espeak-ng's sentence, then silence. */
export function speechWav(): string {
  return make().wav;
}

/** How long the sentence lasts (seconds), before its trailing silence. */
export function speechSeconds(): number {
  return make().speechSeconds;
}
