import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { FfmpegMissing, FfmpegProcess, findExecutable, runningFfmpeg, stopAllFfmpeg } from './process.ts';

const FFMPEG = findExecutable('ffmpeg');
const skip = FFMPEG ? false : 'ffmpeg is not installed (apt-get install ffmpeg)';
const source = ['-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=10'];

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return spawnSync('ps', ['-o', 'stat=', '-p', String(pid)]).stdout.toString().trim().startsWith('Z') === false;
  } catch {
    return false;
  }
};

describe('an owned ffmpeg process (issue 13)', { skip }, () => {
  it('stops when asked: "q" on stdin, so that muxers finish; counted while it runs', async () => {
    const p = await FfmpegProcess.start({ ffmpeg: 'ffmpeg', args: [...source, '-f', 'null', '-'], stdin: true });
    assert.equal(runningFfmpeg(), 1);
    const exit = await p.stop();
    assert.equal(exit.stopped, true);
    assert.equal(exit.code, 0, exit.reason);
    assert.equal(runningFfmpeg(), 0);
  });

  it('a death it was not asked for carries the reason ffmpeg gave', async () => {
    const p = await FfmpegProcess.start({ ffmpeg: 'ffmpeg', args: ['-f', 'lavfi', '-i', 'nosuchfilter=x', '-f', 'null', '-'] });
    const exit = await p.exited;
    assert.equal(exit.stopped, false);
    assert.notEqual(exit.code, 0);
    assert.match(exit.reason, /nosuchfilter|No such filter/i);
  });

  it('a process killed from outside is a failure too', async () => {
    const p = await FfmpegProcess.start({ ffmpeg: 'ffmpeg', args: [...source, '-f', 'null', '-'] });
    process.kill(p.pid!, 'SIGKILL');
    const exit = await p.exited;
    assert.equal(exit.stopped, false);
    assert.equal(exit.signal, 'SIGKILL');
  });

  it('a missing binary is FfmpegMissing, before anything runs', async () => {
    await assert.rejects(FfmpegProcess.start({ ffmpeg: '/nonexistent/ffmpeg', args: [] }), FfmpegMissing);
    await assert.rejects(FfmpegProcess.start({ ffmpeg: 'no-such-ffmpeg-binary', args: [] }), FfmpegMissing);
  });

  it('stderr is held bounded: a flood of output keeps a dozen short lines', async () => {
    const p = await FfmpegProcess.start({ ffmpeg: 'ffmpeg', args: ['-loglevel', 'debug', '-f', 'lavfi', '-i', 'testsrc=size=64x64:rate=50', '-t', '2', '-f', 'null', '-'] });
    await p.exited;
    const lines = p.lastLines();
    assert.ok(lines.length <= 12 && lines.length > 0);
    for (const line of lines) assert.ok(line.length <= 400);
  });

  it('stopAllFfmpeg stops every process (relay shutdown)', async () => {
    await FfmpegProcess.start({ ffmpeg: 'ffmpeg', args: [...source, '-f', 'null', '-'] });
    await FfmpegProcess.start({ ffmpeg: 'ffmpeg', args: [...source, '-f', 'null', '-'], stdin: true });
    assert.equal(runningFfmpeg(), 2);
    await stopAllFfmpeg();
    assert.equal(runningFfmpeg(), 0);
  });

  it('never outlives the relay: a relay process killed with SIGKILL takes its ffmpeg along', async () => {
    const script = `
      import { FfmpegProcess } from ${JSON.stringify(new URL('./process.ts', import.meta.url).pathname)};
      const p = await FfmpegProcess.start({ ffmpeg: 'ffmpeg', args: ${JSON.stringify([...source, '-f', 'null', '-'])} });
      process.stdout.write(String(p.pid) + '\\n');
      setInterval(() => {}, 1000);
    `;
    const relay = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const pid = await new Promise<number>((resolve) => relay.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim()))));
    assert.ok(alive(pid), 'ffmpeg runs');
    relay.kill('SIGKILL');
    const deadline = Date.now() + 5000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(alive(pid), false, 'ffmpeg died with its relay');
  });
});
