/**
 * A microphone that speaks: Chromium's fake audio capture fed the speech WAV of
 * test/speech-wav.ts (espeak-ng's sentence, then two seconds of silence; Chromium loops the file).
 *
 * Use in a spec file: `test.use({ launchOptions: speechLaunchOptions() })`.
 */
import { CHROMIUM_ARGS } from '../../playwright.config.ts';
import { speechWav } from '../../test/speech-wav.ts';

export { SPEECH, speechWav } from '../../test/speech-wav.ts';

/** Chromium's launch options with the speech WAV as the fake microphone (and the media suite's flags). */
export function speechLaunchOptions() {
  return {
    headless: true,
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: [...CHROMIUM_ARGS, '--disable-features=WebRtcHideLocalIpsWithMdns', '--autoplay-policy=no-user-gesture-required', `--use-file-for-fake-audio-capture=${speechWav()}`],
  };
}
