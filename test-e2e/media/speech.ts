/**
 * A microphone that speaks: Chromium's fake audio capture fed a WAV that espeak-ng writes, with
 * two seconds of silence after the sentence (speech recognisers end an utterance on silence;
 * Chromium loops the file). Made once per test process, removed at exit.
 *
 * Use in a spec file: `test.use({ launchOptions: speechLaunchOptions() })`.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHROMIUM_ARGS } from '../../playwright.config.ts';

/** What the fake microphone says, over and over. Words pocketsphinx recognises well even from a synthetic voice. */
export const SPEECH = 'hello world this is a test of the transcription';

let made: string | null = null;

/** The speech WAV (16-bit mono PCM): espeak-ng's sentence, then silence. */
export function speechWav(): string {
  if (made) return made;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-speech-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const raw = join(dir, 'raw.wav');
  const wav = join(dir, 'speech.wav');
  execFileSync('espeak-ng', ['-w', raw, SPEECH]);
  execFileSync('ffmpeg', ['-loglevel', 'error', '-y', '-i', raw, '-af', 'apad=pad_dur=2', '-ar', '48000', '-ac', '1', '-c:a', 'pcm_s16le', wav]);
  made = wav;
  return wav;
}

/** Chromium's launch options with the speech WAV as the fake microphone (and the media suite's flags). */
export function speechLaunchOptions() {
  return {
    headless: true,
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: [...CHROMIUM_ARGS, '--disable-features=WebRtcHideLocalIpsWithMdns', '--autoplay-policy=no-user-gesture-required', `--use-file-for-fake-audio-capture=${speechWav()}`],
  };
}
