import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { GRANT_FLAGS, PRIVILEGED_FLAGS, type Grant, type GrantFlag } from '../src/protocol/grant.ts';
import { startTestRelay, type TestRelay } from './helpers.ts';
import { rawConnect, rawJoin } from './raw.ts';

const SDP = 'v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n';

/** One gated action: its flag, its wire method and parameters, and how to build the grant. */
interface Row {
  flag: GrantFlag | 'canPublishSources';
  method: string;
  params: Record<string, unknown>;
  /** The grant with the flag; the grant without it is every flag but this one. */
  with?: Grant;
  without?: Grant;
  /** The reason without the flag (default `missing-<flag>`). */
  reason?: string;
}

const ROWS: Row[] = [
  { flag: 'canPublish', method: 'media.publish', params: { source: 'camera', kind: 'video', sdp: SDP } },
  { flag: 'canPublishSources', method: 'media.publish', params: { source: 'screen', kind: 'video', sdp: SDP }, with: { canPublish: true, canPublishSources: ['screen'] }, without: { canPublish: true, canPublishSources: ['camera', 'microphone'] }, reason: 'source-not-allowed' },
  { flag: 'canSubscribe', method: 'media.subscribe', params: { participantId: 'nobody', source: 'camera' } },
  { flag: 'canPublishData', method: 'pubsub.publish', params: { topic: 't', payload: 1 } },
  { flag: 'canPublishData', method: 'stream.open', params: { size: 1, kind: 'bytes' } },
  { flag: 'canSubscribeData', method: 'pubsub.subscribe', params: { topic: 't' } },
  { flag: 'canSubscribeData', method: 'pubsub.history', params: { topic: 't' } },
  { flag: 'canRecord', method: 'output.start', params: { output: 'recording' } },
  { flag: 'canRecord', method: 'output.stop', params: { output: 'recording' } },
  { flag: 'canHls', method: 'output.start', params: { output: 'hls' } },
  { flag: 'canHls', method: 'output.stop', params: { output: 'hls' } },
  { flag: 'canLivestream', method: 'output.start', params: { output: 'livestream' } },
  { flag: 'canLivestream', method: 'output.stop', params: { output: 'livestream' } },
  { flag: 'canTranscribe', method: 'output.start', params: { output: 'transcription' } },
  { flag: 'canTranscribe', method: 'output.stop', params: { output: 'transcription' } },
  { flag: 'canWhiteboard', method: 'output.start', params: { output: 'whiteboard' } },
  { flag: 'canWhiteboard', method: 'output.stop', params: { output: 'whiteboard' } },
  { flag: 'canWhiteboard', method: 'whiteboard.draw', params: { shape: { kind: 'rect', x: 0, y: 0, w: 1, h: 1 } } },
  { flag: 'canWhiteboard', method: 'whiteboard.clear', params: {} },
  { flag: 'canModerate', method: 'participant.remove', params: { participantId: 'nobody' } },
  { flag: 'canModerate', method: 'participant.request-unpublish', params: { participantId: 'nobody', source: 'camera' } },
  { flag: 'canModerate', method: 'media.force-unpublish', params: { participantId: 'nobody', source: 'camera' } },
  { flag: 'canModerate', method: 'lobby.admit', params: { participantIds: ['nobody'] } },
  { flag: 'canModerate', method: 'lobby.deny', params: { participantIds: ['nobody'] } },
  { flag: 'canModerate', method: 'room.end', params: {} },
];

const only = (flag: GrantFlag): Grant => ({ [flag]: true, ...(flag === 'canSubscribeData' ? {} : { canSubscribeData: false }) });
/** Every flag but one (and, for a domain-wide token, none of those it may not carry). */
const allBut = (flag: GrantFlag, domainWide: boolean): Grant =>
  Object.fromEntries(GRANT_FLAGS.map((f) => [f, f !== flag && !(domainWide && PRIVILEGED_FLAGS.includes(f))]));

describe('the grant matrix, from a raw socket (docs/grant-matrix.md)', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(() => t.close());
  let n = 0;

  async function attempt(row: Row, grant: Grant, tier: 'speaker' | 'viewer', domainWide: boolean) {
    const room = `gm-${n++}`;
    const token = t.token({ ...(domainWide ? {} : { roomId: room }), grant, isViewer: tier === 'viewer', ttl: 600 });
    const client = await rawJoin(t.url, token, domainWide ? { roomId: room } : {});
    const answer = await client.request(row.method, row.params);
    client.ws.close();
    return answer.error as { code: string; reason?: string } | undefined;
  }

  for (const tier of ['speaker', 'viewer'] as const) {
    for (const domainWide of [false, true]) {
      const scope = domainWide ? 'domain-wide token' : 'room-scoped token';
      for (const row of ROWS) {
        const flag = row.flag === 'canPublishSources' ? 'canPublish' : row.flag;
        // a domain-wide token cannot carry a privileged flag at all: refused at join (below)
        if (domainWide && PRIVILEGED_FLAGS.includes(flag)) continue;
        it(`${tier}, ${scope}: ${row.method} ${JSON.stringify(row.params).slice(0, 40)} needs ${row.flag}`, async () => {
          const refused = await attempt(row, row.without ?? allBut(flag, domainWide), tier, domainWide);
          assert.equal(refused?.code, 'INVALID_PERMISSIONS', `without ${row.flag}`);
          assert.equal(refused?.reason, row.reason ?? `missing-${flag}`);
          const allowed = await attempt(row, row.with ?? only(flag), tier, domainWide);
          assert.notEqual(allowed?.code, 'INVALID_PERMISSIONS', `with ${row.flag}: ${JSON.stringify(allowed)}`);
          if (tier === 'viewer' && row.method === 'media.publish') assert.equal(allowed?.reason, 'viewer-cannot-publish');
        });
      }
    }
  }

  it('domain-wide tokens with a privileged flag are refused at join', async () => {
    const { createHmac } = await import('node:crypto');
    const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const flag of PRIVILEGED_FLAGS) {
      // signed by hand: mintToken refuses to make such a token
      const input = `${enc({ alg: 'HS256', typ: 'JWT' })}.${enc({ iss: 'test-key', exp: Math.floor(Date.now() / 1000) + 60, grant: { [flag]: true } })}`;
      const token = `${input}.${createHmac('sha256', 'test-secret-0123456789abcdef').update(input).digest('base64url')}`;
      const d = await rawConnect(t.url);
      d.send({ type: 'join', v: 1, token, participantId: 'x', roomId: 'r' });
      const refusal = await d.next();
      assert.equal(refusal.type, 'join-error');
      assert.deepEqual([(refusal.error as { code: string }).code, (refusal.error as { reason: string }).reason], ['INVALID_TOKEN', 'privileged-grant-needs-room']);
    }
  });

  it('the table in docs/grant-matrix.md lists every row', () => {
    const doc = readFileSync(new URL('../docs/grant-matrix.md', import.meta.url), 'utf8');
    for (const row of ROWS) {
      const line = doc.split('\n').find((l) => l.startsWith(`| \`${row.flag}\` |`) && l.includes(`\`${row.method}\``));
      assert.ok(line, `${row.flag} ${row.method}`);
    }
  });
});
