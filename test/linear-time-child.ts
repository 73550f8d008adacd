/**
 * The child process of `linear-time.test.ts`: runs one hostile input through one of the parsers
 * it names, and says when it is done. A parser that backtracks never says so; the test ends it.
 */
import { parseClientFrame } from '../src/protocol/validate.ts';
import { remoteSdp } from '../relay/media/remote-sdp.ts';
import { isPublicAddress } from '../relay/outputs/rtmp-target.ts';
import { RoomService } from '../src/server/room-service.ts';

/** Each case: what it runs, given the input the test sends. */
export const CASES = {
  frame: (text: string) => void parseClientFrame(text),
  sdp: (text: string) => void remoteSdp(text),
  address: (text: string) => void isPublicAddress(text),
  serviceUrl: (text: string) => {
    try {
      new RoomService({ url: text, apiKey: 'k', secret: 's' });
    } catch {
      // refused: what matters is that it was refused at once
    }
  },
} satisfies Record<string, (input: string) => void>;

process.on('message', ({ name, input }: { name: keyof typeof CASES; input: string }) => {
  CASES[name](input);
  process.send!('done');
});
process.send?.('ready');
