import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { projectRuns } from '../relay/outputs/storage.ts';
import { DEFAULT_PROJECT, KeyStore } from '../relay/token/keys.ts';
import { signJwt } from '../src/server/jwt.ts';
import { mintToken } from '../src/server/mint.ts';
import { RoomService } from '../src/server/room-service.ts';
import type { Room } from '../src/room.ts';
import { rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawJoin } from './raw.ts';

const KiB = 1024;
const QUOTA = 256 * KiB;
const ALPHA = { key: 'alpha-key', secret: 'alpha-secret-0123456789abcdef' };
const BETA = { key: 'beta-key', secret: 'beta-secret-0123456789abcdef' };
const GAMMA = { key: 'gamma-key', secret: 'gamma-secret-0123456789abcdef' };
type Project = typeof ALPHA;

/** A raw server-API call (paths a URL parser would rewrite), answered with its status and body. */
function rawCall(port: number, method: string, path: string, who: Project): Promise<{ status: number; body: { error?: { code: string; reason?: string } } }> {
  const now = Math.floor(Date.now() / 1000);
  const token = signJwt({ iss: who.key, admin: true, iat: now, exp: now + 60 }, who.secret);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers: { authorization: `Bearer ${token}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString() || '{}') }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The reason the room's HLS run ends with once it is no longer starting or active (within 40 s). */
function hlsEnds(room: Room): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the HLS run did not reach the quota within 40 s')), 40_000);
    const off = room.on('output-changed', (change) => {
      if (change.output !== 'hls' || change.state === 'active' || change.state === 'starting') return;
      off();
      clearTimeout(timer);
      resolve(change.error?.reason);
    });
  });
}

describe('disk quota per project (--disk-quota) and deleting recordings through the server API', () => {
  let t: TestRelay;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-quota-'));
  const service = (who: Project) => new RoomService({ url: t.url, apiKey: who.key, secret: who.secret });
  const host = (who: Project, roomId: string): Promise<Room> =>
    t.join({ token: mintToken({ apiKey: who.key, secret: who.secret, roomId, participantId: 'host', grant: { canRecord: true, canHls: true, canPublishData: true } }) });

  before(async () => {
    const keys = new KeyStore();
    keys.replaceProjects({ alpha: { keys: { [ALPHA.key]: ALPHA.secret }, revoked: [] }, beta: { keys: { [BETA.key]: BETA.secret }, revoked: [] }, gamma: { keys: { [GAMMA.key]: GAMMA.secret }, revoked: [] } });
    t = await startTestRelay({
      keys,
      recordingsDir: join(dir, 'rec'),
      hlsDir: join(dir, 'hls'),
      hlsSegmentSeconds: 1,
      diskQuota: QUOTA,
      composite: { width: 320, height: 180, fps: 10, videoKbps: 100 },
    });
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a project past its quota: its running recording fails, its starts are refused (disk-quota) while another project records; a deletion frees the quota', async () => {
    const alpha = await host(ALPHA, 'big');
    const status = await alpha.recording.start();
    const id = status.info!.recording!;
    const failed = new Promise<{ state: string; error?: { code?: string; reason?: string } }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the recording did not fail within 15 s')), 15_000);
      const off = alpha.on('output-changed', (change) => {
        if (change.output !== 'recording' || change.state === 'active') return;
        off();
        clearTimeout(timer);
        resolve(change);
      });
    });
    // the recording's timeline keeps every message: 5 × 60 KB is past 256 KiB
    for (let i = 0; i < 5; i++) await alpha.pubsub.publish('chat', 'x'.repeat(60_000));
    const change = await failed;
    assert.equal(change.state, 'failed');
    assert.equal(change.error?.code, 'RATE_LIMITED');
    assert.equal(change.error?.reason, 'disk-quota');

    for (const output of ['recording', 'hls'] as const) {
      const err = await rejectsWith(alpha[output].start(), 'RATE_LIMITED');
      assert.equal(err.reason, 'disk-quota', `${output} refused at the quota`);
    }
    const other = await host(ALPHA, 'another-room');
    assert.equal((await rejectsWith(other.recording.start(), 'RATE_LIMITED')).reason, 'disk-quota', 'in every room of the project');
    await assert.rejects(service(ALPHA).startOutput('another-room', 'recording'), (err: { code?: string; reason?: string }) => err.code === 'RATE_LIMITED' && err.reason === 'disk-quota');

    const beta = await host(BETA, 'big');
    const theirs = await beta.recording.start();
    await beta.recording.stop();
    assert.ok(theirs.info?.recording, 'another project on the same relay still records');

    // another project's key cannot delete it, nor can a path or a malformed id
    assert.equal((await rejectsWith(service(BETA).deleteRecording('big', id), 'NOT_FOUND')).reason, 'unknown-recording');
    for (const path of [`big/recordings/..%2F..%2Fbeta`, `big/recordings/..`, `big/recordings/%2E%2E`, `..%2Fbig/recordings/${id}`, `big%2F..%2Fbig/recordings/${id}`, `big/recordings/${id.toUpperCase()}`, `big/recordings/${id}%00`]) {
      const answer = await rawCall(t.relay.port, 'DELETE', `/api/v1/rooms/${path}`, ALPHA);
      assert.equal(answer.status, 404, path);
    }
    assert.equal((await rejectsWith(service(ALPHA).deleteRecording('.', id), 'NOT_FOUND')).reason, 'unknown-recording');
    assert.equal((await rejectsWith(service(ALPHA).deleteRecording('big', '..'), 'NOT_FOUND')).reason, 'unknown-recording');

    // the failed recording's files are final once its stop has run: then it can be deleted, once
    await until(
      async () => {
        try {
          await service(ALPHA).deleteRecording('big', id);
          return true;
        } catch (err) {
          assert.equal((err as { reason?: string }).reason, 'recording-active');
          return false;
        }
      },
      10_000,
      'the failed recording deleted',
    );
    assert.equal((await rejectsWith(service(ALPHA).deleteRecording('big', id), 'NOT_FOUND')).reason, 'unknown-recording');

    const again = await alpha.recording.start();
    assert.ok(again.info?.recording, 'the freed quota lets the project record again');
    const running = again.info!.recording!;
    const busy = await rejectsWith(service(ALPHA).deleteRecording('big', running), 'INVALID_STATE');
    assert.equal(busy.reason, 'recording-active', 'a recording being written is not deleted');
    const answer = await rawCall(t.relay.port, 'DELETE', `/api/v1/rooms/big/recordings/${running}`, ALPHA);
    assert.equal(answer.status, 409);
    await alpha.recording.stop();
    await service(ALPHA).deleteRecording('big', running);
    await Promise.all([alpha.leave(), other.leave(), beta.leave()]);
  });

  it('a stopped HLS run that holds its project at the quota is deleted by the next HLS start in its room, and by the room\'s end (found by review: nothing could free it)', async () => {
    const gamma = await host(GAMMA, 'h');
    const failed = hlsEnds(gamma);
    const first = await gamma.hls.start();
    const firstRun = /\/hls\/([0-9a-f]{32})\//.exec(first.info!.playlist!)![1]!;
    assert.equal(await failed, 'disk-quota', 'the run fails once its segments pass the quota');
    const elsewhere = await host(GAMMA, 'elsewhere');
    assert.equal((await rejectsWith(elsewhere.hls.start(), 'RATE_LIMITED')).reason, 'disk-quota', 'the stopped run still counts');
    // its own room starts again: the run it replaces goes before the quota is looked at
    const second = await gamma.hls.start();
    const secondRun = /\/hls\/([0-9a-f]{32})\//.exec(second.info!.playlist!)![1]!;
    assert.ok(!existsSync(join(dir, 'hls', firstRun)), 'the previous run is deleted');
    await gamma.hls.stop();
    assert.ok(existsSync(join(dir, 'hls', secondRun)), 'a stopped run stays while its room lives');
    // the room ends: its last run goes, and the project records again
    await gamma.leave();
    await until(() => !existsSync(join(dir, 'hls', secondRun)), 10_000, 'the room\'s last run deleted when the room ended');
    const status = await elsewhere.recording.start();
    assert.ok(status.info?.recording, 'the quota is free again');
    await elsewhere.recording.stop();
    await elsewhere.leave();
  });
});

describe('an HLS run that failed at the quota and is still stopping when its room starts again', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-quota-slow-'));
  const marks = join(dir, 'marks');
  // ffmpeg as it is, but its exit comes 1.5 s after it has finished (a slow disk's last writes);
  // then it notes whether its segment directory was still there
  const ffmpeg = join(dir, 'ffmpeg');
  writeFileSync(
    ffmpeg,
    `#!/bin/bash
real=$(command -v ffmpeg)
"$real" "$@"; code=$?
seg=""
for a in "$@"; do case "$a" in file:*/seg%d.ts) seg="\${a#file:}";; esac; done
sleep 1.5
if [ -n "$seg" ]; then d="\${seg%/seg%d.ts}"; if [ -d "$d" ]; then echo "present $d" >> ${JSON.stringify(marks)}; else echo "gone $d" >> ${JSON.stringify(marks)}; fi; fi
exit $code
`,
    { mode: 0o755 },
  );
  let t: TestRelay;
  before(async () => {
    const keys = new KeyStore();
    keys.replaceProjects({ gamma: { keys: { [GAMMA.key]: GAMMA.secret }, revoked: [] } });
    t = await startTestRelay({ keys, hlsDir: join(dir, 'hls'), hlsSegmentSeconds: 1, diskQuota: QUOTA, ffmpeg, composite: { width: 320, height: 180, fps: 10, videoKbps: 100 } });
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the next start deletes the failed run only once its ffmpeg has ended, and starts (its deletion raced the last writes and left the run counted)', async () => {
    const room = await t.join({ token: mintToken({ apiKey: GAMMA.key, secret: GAMMA.secret, roomId: 'slow', participantId: 'host', grant: { canHls: true } }) });
    const failed = hlsEnds(room);
    const first = await room.hls.start();
    const firstRun = join(dir, 'hls', /\/hls\/([0-9a-f]{32})\//.exec(first.info!.playlist!)![1]!);
    assert.equal(await failed, 'disk-quota');
    assert.ok(!existsSync(marks), 'the failed run\'s ffmpeg is still ending');
    const second = await room.hls.start();
    assert.ok(second.info?.playlist, 'the room starts again: the run it replaces no longer counts');
    assert.ok(!existsSync(firstRun), 'the previous run is deleted');
    assert.equal(readFileSync(marks, 'utf8').split('\n')[0], `present ${firstRun}`, 'its directory was there until its ffmpeg had ended');
    await room.hls.stop();
    await room.leave();
  });
});

describe('HLS starts cancelled by a stop or by the room\'s end leave no run behind', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-hls-cancel-'));
  const hlsDir = join(dir, 'hls');
  const runsOnDisk = () => (existsSync(hlsDir) ? readdirSync(hlsDir).filter((n) => /^[0-9a-f]{32}$/.test(n)) : []);
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ hlsDir, hlsSegmentSeconds: 1, diskQuota: QUOTA, composite: { width: 160, height: 90, fps: 5, videoKbps: 50 } });
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('start and stop sent together, again and again, then the room ends: no run directory is left, none counted in the quota (a cancelled start went on to make one that nothing deleted)', async () => {
    const c = await rawJoin(t.url, t.token({ roomId: 'cancelled', grant: { canHls: true } }));
    for (let i = 0; i < 6; i++) {
      c.send({ type: 'request', id: 100 + 2 * i, method: 'output.start', params: { output: 'hls' } });
      c.send({ type: 'request', id: 101 + 2 * i, method: 'output.stop', params: { output: 'hls' } });
      // the start is answered output-stopped, and went on in the background
      for (const id of [100 + 2 * i, 101 + 2 * i]) await c.next((f) => f.type === 'response' && f.id === id, 20_000);
    }
    c.ws.close();
    await until(() => t.relay.context.rooms.size === 0, 20_000, 'the room ended');
    await until(() => runsOnDisk().length === 0 && projectRuns(hlsDir, DEFAULT_PROJECT).length === 0, 20_000, 'every run deleted, none counted');
  });
});
