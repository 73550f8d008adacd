import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Media } from './media.ts';

/** A subscription slot and its publication, as the media manager sees them. */
function subscribed() {
  const slot = { id: 's1', sentSize: { maxWidth: 1, maxHeight: 1 }, sizing: null };
  const publication = { subscription: slot, preferredSize: slot.sentSize };
  return { slot, publication: publication as never };
}

it('preferred sizes: a size given in the same step as the last request settles is still sent; the relay ends with the latest', async () => {
  const sent: unknown[] = [];
  let answer: () => void = () => undefined;
  const connection = { request: (_m: string, p: { size: unknown }) => (sent.push(p.size), new Promise<void>((r) => (answer = r))) };
  const media = new Media(connection as never, {} as never, () => ({}) as never, false, () => undefined);
  const { slot, publication } = subscribed();
  const first = media.setPreferredSize(publication, { maxWidth: 2, maxHeight: 2 });
  await new Promise((r) => setTimeout(r, 0));
  answer();
  let later: Promise<void> | null = null;
  queueMicrotask(() => (later = media.setPreferredSize(publication, { maxWidth: 3, maxHeight: 3 })));
  await first;
  // the next request waits out the interval between two: answer it when it comes (a size that was lost never comes)
  for (const deadline = Date.now() + 3000; sent.length < 2 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
  assert.equal(sent.length, 2, 'the size given as the first request settled was sent');
  answer();
  await later;
  assert.deepEqual(sent, [{ maxWidth: 2, maxHeight: 2 }, { maxWidth: 3, maxHeight: 3 }]);
  assert.deepEqual(slot.sentSize, { maxWidth: 3, maxHeight: 3 });
});

it('preferred sizes: requests of one subscription are at least 500 ms apart, whatever the caller does', async () => {
  const at: number[] = [];
  const connection = { request: () => (at.push(Date.now()), Promise.resolve()) };
  const media = new Media(connection as never, {} as never, () => ({}) as never, false, () => undefined);
  const { publication } = subscribed();
  const end = Date.now() + 1200;
  for (let w = 10; Date.now() < end; w++) {
    void media.setPreferredSize(publication, { maxWidth: w, maxHeight: w });
    await new Promise((r) => setTimeout(r, 5));
  }
  await media.setPreferredSize(publication, { maxWidth: 5000, maxHeight: 5000 });
  assert.ok(at.length >= 2 && at.length <= 4, `${at.length} requests`);
  for (let i = 1; i < at.length; i++) assert.ok(at[i]! - at[i - 1]! >= 490, `${at[i]! - at[i - 1]!} ms apart`);
});
