/**
 * The `local` engine: per microphone, one ffmpeg whose `asr` filter (pocketsphinx, Debian's
 * `pocketsphinx-en-us` model) recognises speech offline, on the relay. See `asr-log.ts` for how
 * its results and their times are read.
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { RelayError } from '../../errors.ts';
import { FfmpegMissing, FfmpegProcess } from '../ffmpeg/process.ts';
import { AsrLog } from './asr-log.ts';
import { microphoneInput, reasonLines, SPEECH_FORMAT, type RecogniserEngine } from './recogniser.ts';

/** Debian's English model (`pocketsphinx-en-us`). */
export const DEFAULT_ASR_MODEL = '/usr/share/pocketsphinx/model/en-us';

/** The files of a pocketsphinx model. */
export interface AsrModel {
  hmm: string;
  dict: string;
  lm: string;
}

/** Silence (s) after which `silencedetect` reports it: the end of an utterance, for its times. */
const SILENCE_S = 0.3;

/** Paths go into a filter graph: only characters that need no escaping there. */
const PLAIN_PATH = /^[\w./+-]+$/;

/**
 * The model in `dir` (laid out as Debian's: `en-us/`, `cmudict-en-us.dict`, `en-us.lm.bin`) for
 * `language`. Throws `asr-model-missing` when it is not there, or is not for that language.
 */
export function asrModel(dir: string, language: string): AsrModel {
  if (!/^en(-|$)/i.test(language)) {
    throw new RelayError('INVALID_ARGUMENT', `the local transcription engine has an English model only (pocketsphinx-en-us), not one for "${language}": use a transcription service (--transcription-url)`, 'asr-model-missing');
  }
  const model = { hmm: join(dir, 'en-us'), dict: join(dir, 'cmudict-en-us.dict'), lm: join(dir, 'en-us.lm.bin') };
  const missing = [join(model.hmm, 'mdef'), model.dict, model.lm].filter((file) => !existsSync(file) || statSync(file).size === 0);
  if (missing.length) {
    throw new RelayError('INTERNAL_ERROR', `the speech model is missing (${missing.join(', ')}): install Debian's pocketsphinx-en-us`, 'asr-model-missing');
  }
  if (![model.hmm, model.dict, model.lm].every((p) => PLAIN_PATH.test(p))) {
    throw new RelayError('INTERNAL_ERROR', `the speech model's path has characters a filter graph cannot take plainly: ${dir}`, 'asr-model-missing');
  }
  return model;
}

const asrFilter = (model: AsrModel) => `asr=hmm=${model.hmm}:dict=${model.dict}:lm=${model.lm}`;

/** The longest the model check may take (ms; it takes 0.4 s). */
const CHECK_DEADLINE_MS = 20_000;
/** A check that failed is made again after this (ms): a model installed meanwhile is found. */
const FAILED_CHECK_MS = 30_000;

/** The checks made or under way, by ffmpeg and model: one process however many starts ask. */
const checks = new Map<string, { result: Promise<void>; failedAt: number | null }>();

/**
 * Load the model through ffmpeg's `asr` (0.4 s of CPU, 144 MB): an ffmpeg built without
 * pocketsphinx, or a model that does not load, fails here, at the output's start, not at each
 * microphone. Made once per ffmpeg and model for the relay's life, and shared by the starts that
 * ask meanwhile: started and stopped in a loop in many rooms (a domain-wide `canTranscribe`
 * token), every start ran one, outside the recognisers' caps (60 processes at once, 5.9 GB, from
 * one token in three rooms). A failure is kept for {@link FAILED_CHECK_MS}.
 */
export function checkAsr(ffmpeg: string, model: AsrModel, deadlineMs = CHECK_DEADLINE_MS): Promise<void> {
  const key = [ffmpeg, model.hmm, model.dict, model.lm].join('\u0000');
  const known = checks.get(key);
  if (known && (known.failedAt === null || Date.now() - known.failedAt < FAILED_CHECK_MS)) return known.result;
  const check = { result: runAsrCheck(ffmpeg, model, deadlineMs), failedAt: null as number | null };
  check.result.catch(() => (check.failedAt = Date.now()));
  checks.set(key, check);
  return check.result;
}

async function runAsrCheck(ffmpeg: string, model: AsrModel, deadlineMs: number): Promise<void> {
  const lines = reasonLines();
  let proc: FfmpegProcess;
  try {
    proc = await FfmpegProcess.start({
      ffmpeg,
      args: ['-loglevel', 'level+error', '-f', 'lavfi', '-i', 'anullsrc=r=16000:cl=mono', '-t', '0.1', '-af', asrFilter(model), '-f', 'null', '-'],
      stderrLine: (line) => lines.keep(line),
    });
  } catch (err) {
    if (err instanceof FfmpegMissing) throw new RelayError('INTERNAL_ERROR', err.message, 'ffmpeg-missing');
    throw err;
  }
  // a check that hangs (a model on a stuck mount) is ended: kept pending, it would hold every later start
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), deadlineMs)));
  const exit = await Promise.race([proc.exited, late]);
  clearTimeout(timer);
  if (exit === null) {
    // not awaited: a process stuck in the kernel (a hung mount) does not exit even when killed
    void proc.stop(1000);
    throw new RelayError('INTERNAL_ERROR', `loading the speech model took over ${deadlineMs / 1000} s`, 'ffmpeg-failed');
  }
  if (exit.code !== 0) throw new RelayError('INTERNAL_ERROR', lines.reason(`this ffmpeg cannot run the asr filter (built without pocketsphinx?) or the model does not load`), 'ffmpeg-failed');
}

/** The `local` engine with a model. */
export function localEngine(ffmpeg: string, model: AsrModel): RecogniserEngine {
  const graph = [SPEECH_FORMAT, 'asettb=1/1000000', `silencedetect=n=-40dB:d=${SILENCE_S}`, asrFilter(model), 'ametadata=mode=print'].join(',');
  return async ({ track, workDir, heard, ended, log }) => {
    const input = await microphoneInput(track, workDir);
    const asr = new AsrLog(SILENCE_S * 1e6, Date.now());
    const lines = reasonLines();
    const proc = await FfmpegProcess.start({
      ffmpeg,
      // info: ametadata prints at that level
      args: ['-loglevel', 'level+info', '-nostats', ...input.args, '-af', graph, '-f', 'null', '-'],
      stderrLine: (line) => {
        const utterance = asr.line(line);
        if (utterance) heard(utterance);
        else lines.keep(line);
      },
    });
    const feed = input.feed();
    void proc.exited.then((exit) => {
      feed.stop();
      if (!exit.stopped) ended(lines.reason(`ffmpeg ended (${exit.signal ?? `exit code ${exit.code}`})`));
    });
    log.debug('transcription: local recogniser started', { pid: proc.pid });
    return {
      stop: async () => {
        // nothing to finish: an utterance not yet followed by silence is not a result
        await proc.stop(1000);
        feed.stop();
      },
    };
  };
}
