import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RtpHeader, RtpPacket } from 'werift';
import { publicationByteRate, PUBLICATION_PACKET_RATE, WeriftSource } from './werift-source.ts';

const PUBLICATION_BYTE_RATE = publicationByteRate(2_500_000);

const packet = (seq: number, bytes: number) => new RtpPacket(new RtpHeader({ payloadType: 96, sequenceNumber: seq & 0xffff, timestamp: seq, ssrc: 1 }), Buffer.alloc(bytes));
const counters = () => ({ packets: 0, bytes: 0, nacks: 0, keyFrameRequests: 0 });

describe('a publication forwards at most its rate', () => {
  it(`a publisher that ignores the relay's REMB gets at most ${PUBLICATION_PACKET_RATE} packets a second (twice that at once) copied to its subscribers, not 7,000`, () => {
    const source = new WeriftSource('video', () => undefined, counters());
    let forwarded = 0;
    source.onPacket('', () => void forwarded++);
    const began = performance.now();
    for (let i = 0; i < 10_000; i++) source.deliver('', packet(i, 100));
    // the burst, and what the rate refilled while the loop ran (however slow the machine)
    const refilled = ((performance.now() - began) / 1000) * PUBLICATION_PACKET_RATE;
    assert.ok(forwarded >= 2 * PUBLICATION_PACKET_RATE && forwarded <= 2 * PUBLICATION_PACKET_RATE + refilled + 1, `${forwarded} forwarded`);
  });

  it(`and at most twice the REMB's bitrate in payload bytes a second, ${PUBLICATION_BYTE_RATE} (twice that at once)`, () => {
    const source = new WeriftSource('video', () => undefined, counters());
    let bytes = 0;
    source.onPacket('', (p) => void (bytes += (p as RtpPacket).payload.length));
    const began = performance.now();
    for (let i = 0; i < 1500; i++) source.deliver('', packet(i, 1200));
    const refilled = ((performance.now() - began) / 1000) * PUBLICATION_BYTE_RATE;
    assert.ok(bytes >= 2 * PUBLICATION_BYTE_RATE - 1200 && bytes <= 2 * PUBLICATION_BYTE_RATE + refilled + 1200, `${bytes} bytes forwarded`);
    source.dispose();
  });
});
