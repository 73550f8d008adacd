/**
 * Token verifications per second on one core (this thread), beside the floor: one HMAC-SHA256
 * of the same signing input with a pre-imported key, which every verification must include.
 */
import { createHmac, createSecretKey } from 'node:crypto';
import { KeyStore } from '../relay/token/keys.ts';
import { verifyToken } from '../relay/token/verify.ts';
import { mintToken } from '../src/server/mint.ts';
import { table } from './lib.ts';

function rate(fn: () => void, seconds = 2): number {
  for (let i = 0; i < 20_000; i++) fn(); // warm up
  let n = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  let now = start;
  while (now < end) {
    for (let i = 0; i < 1000; i++) fn();
    n += 1000;
    now = performance.now();
  }
  return n / ((now - start) / 1000);
}

export function benchVerify(): string {
  const secret = 'bench-secret-0123456789';
  const keys = new KeyStore({ bench: secret });
  const token = mintToken({
    apiKey: 'bench',
    secret,
    roomId: 'town-hall',
    participantId: 'a1b2c3d4-e5f6-4711-8899-aabbccddeeff',
    grant: { canPublish: true, canSubscribe: true, canPublishData: true, canPublishSources: ['camera', 'microphone'] },
    ttl: '2h',
  });
  const options = { keys, maxTtlRoom: 86400, maxTtlDomain: 3600 };
  if (!verifyToken(token, options).ok) throw new Error('bench token does not verify');
  const ours = rate(() => {
    if (!verifyToken(token, options).ok) throw new Error('failed');
  });
  const key = createSecretKey(Buffer.from(secret));
  const input = token.slice(0, token.lastIndexOf('.'));
  const floor = rate(() => createHmac('sha256', key).update(input).digest());
  const k = (n: number) => `${Math.round(n).toLocaleString('en-US')}/s`;
  return table(
    ['measure (one core)', 'rate'],
    [
      [`verifyToken, full steps 1–8 (${token.length}-byte token)`, k(ours)],
      ['floor: HMAC-SHA256 of the signing input, pre-imported key', k(floor)],
      ['ratio verify / floor (target ≥ 150,000/s)', `${(ours / floor).toFixed(2)}×`],
    ],
  );
}
