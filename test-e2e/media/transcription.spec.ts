import { expect, openSdkPage, test } from '../fixtures.ts';
import { speechLaunchOptions } from './speech.ts';

test.use({ launchOptions: speechLaunchOptions() });

/** Words of the sentence pocketsphinx gets from espeak-ng's voice through Chromium's Opus (see docs/control.md). */
const CLEAR_WORDS = ['hello', 'world', 'test', 'transcription'];

test('a speaking Chromium microphone is transcribed on the relay; a subscriber with canSubscribeData gets the words', async ({ browser, origin, relay, token }) => {
  test.setTimeout(90_000);
  const speaker = await (await browser.newContext()).newPage();
  const listener = await (await browser.newContext()).newPage();
  await Promise.all([openSdkPage(speaker, origin, 'esm'), openSdkPage(listener, origin, 'esm')]);
  const roomId = 'transcribed';

  await listener.evaluate(async ({ url, t }) => {
    const room = await window.Tessera.Sdk.join({ url, token: t });
    window.room = room;
    const heard: Array<{ participantId: string; text: string; final: boolean; startedAt: number; endedAt: number }> = [];
    (window as unknown as { heard: typeof heard }).heard = heard;
    room.on('transcription', (e) => heard.push(e));
  }, { url: relay.url, t: token({ roomId, participantId: 'listener', grant: { canSubscribeData: true } }) });

  const info = await speaker.evaluate(async ({ url, t }) => {
    const room = await window.Tessera.Sdk.join({ url, token: t });
    window.room = room;
    const started = await room.transcription.start({ language: 'en' });
    await room.localParticipant.publish('microphone');
    return started.info;
  }, { url: relay.url, t: token({ roomId, participantId: 'speaker', grant: { canPublish: true, canTranscribe: true } }) });
  expect(info).toEqual({ language: 'en', engine: 'local' });

  // Chromium loops the sentence with two seconds of silence: an utterance every few seconds
  await listener.waitForFunction(() => (window as unknown as { heard: unknown[] }).heard.length >= 3, undefined, { timeout: 45_000 });
  const heard = await listener.evaluate(() => (window as unknown as { heard: Array<{ participantId: string; text: string; final: boolean; startedAt: number; endedAt: number }> }).heard);
  console.log(`heard: ${heard.map((e) => JSON.stringify(e.text)).join(', ')}`);
  for (const e of heard) {
    expect(e.participantId).toBe('speaker');
    expect(e.final).toBe(true);
    expect(e.endedAt).toBeGreaterThan(e.startedAt);
  }
  const words = heard.flatMap((e) => e.text.toLowerCase().split(/\s+/));
  expect(words.some((w) => CLEAR_WORDS.includes(w)), `some of ${CLEAR_WORDS.join(', ')} in ${JSON.stringify(heard.map((e) => e.text))}`).toBe(true);

  await speaker.evaluate(async () => {
    await window.room!.transcription.stop();
    await window.room!.leave();
  });
  await listener.evaluate(() => window.room!.leave());
});
