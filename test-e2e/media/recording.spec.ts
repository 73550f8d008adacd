import { expect, openSdkPage, test } from '../fixtures.ts';

test('recording writes each published track to WebM beside the timeline, downloadable with a canRecord token', async ({ browser, origin, relay, token }) => {
  const page = await (await browser.newContext()).newPage();
  await openSdkPage(page, origin, 'esm');
  const status = await page.evaluate(async ({ url, t }) => {
    const room = await window.Tessera.Sdk.join({ url, token: t });
    window.room = room;
    await room.localParticipant.publish('camera');
    await room.localParticipant.publish('microphone');
    const started = await room.recording.start();
    await new Promise((r) => setTimeout(r, 4000));
    await room.recording.stop();
    return started;
  }, { url: relay.url, t: token({ roomId: 'rec-media', participantId: 'host', grant: { canPublish: true, canRecord: true } }) });
  const http = relay.url.replace('ws:', 'http:');
  const auth = { authorization: `Bearer ${token({ roomId: 'rec-media', grant: { canRecord: true } })}` };
  const list = (await (await fetch(`${http}/recordings`, { headers: auth })).json()) as { recordings: Array<{ recording: string; file: string; url: string; size: number }> };
  const id = status.info!.recording!;
  const mine = list.recordings.filter((r) => r.recording === id);
  expect(mine.map((r) => r.file).sort()).toEqual(['composite.mp4', 'host--camera.webm', 'host--microphone.webm', 'timeline.jsonl']);
  for (const r of mine.filter((x) => x.file.endsWith('.webm'))) {
    const res = await fetch(`${http}${r.url}`, { headers: auth });
    expect(res.headers.get('content-type')).toBe('video/webm');
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect([...bytes.subarray(0, 4)]).toEqual([0x1a, 0x45, 0xdf, 0xa3]); // EBML: a WebM file
    expect(bytes.length).toBeGreaterThan(r.file.includes('camera') ? 20_000 : 2_000);
  }
  const timeline = (await (await fetch(`${http}${status.info!.url}`, { headers: auth })).text()).trim().split('\n').map((l) => JSON.parse(l) as { type: string; file?: string });
  expect(timeline.filter((e) => e.type === 'track-recorded').map((e) => e.file).sort()).toEqual(['host--camera.webm', 'host--microphone.webm']);
});
