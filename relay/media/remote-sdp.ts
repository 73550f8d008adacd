/**
 * What of a member's SDP reaches werift. The relay is an ICE-lite agent: it answers the member's
 * connectivity checks and learns the member's address from them (signed with the ICE password),
 * so the member's candidates are never needed. werift still takes each one: it pairs it and sorts
 * its whole check list again (960 candidates in one answer held the event loop 360–427 ms), and
 * it looks a name containing `.local` up over multicast DNS, from a socket whose bind failure
 * nobody hears (an uncaught `EADDRINUSE` ended the process when another program held port 5353),
 * sending a query onto the relay's network for each (256 in 1.5 s). So only candidates over UDP
 * whose address is an IP literal are kept, at most {@link MAX_REMOTE_CANDIDATES}. (Told by
 * `isIP`: a pattern for IPv6 took time quadratic in the address, 5 s for one of 64 KiB of colons.)
 */
import { isIP } from 'node:net';

/** Candidates of a member's SDP handed to werift (a browser has one or two per network interface). */
export const MAX_REMOTE_CANDIDATES = 16;

/** `sdp` without the candidates werift should not see (see the module's comment). */
export function remoteSdp(sdp: string): string {
  if (!sdp.includes('a=candidate:')) return sdp;
  let kept = 0;
  const lines = sdp.split(/\r?\n/);
  const out: string[] = [];
  for (const line of lines) {
    if (!line.startsWith('a=candidate:')) {
      out.push(line);
      continue;
    }
    // a=candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type> …
    const fields = line.split(' ');
    const transport = fields[2]?.toLowerCase();
    const address = fields[4] ?? '';
    if (transport === 'udp' && isIP(address) !== 0 && !address.includes('%') && kept < MAX_REMOTE_CANDIDATES) {
      kept++;
      out.push(line);
    }
  }
  return out.join('\r\n');
}
