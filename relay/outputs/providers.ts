import { DEFAULTS } from '../config.ts';
import type { ProviderFactories } from './board.ts';
import { HlsProvider } from './hls.ts';
import { LivestreamProvider } from './livestream.ts';
import { RecordingProvider } from './recording.ts';
import { TranscriptionProvider } from './transcription.ts';
import { RecogniserPool, type RecogniserLimits } from './transcription/pool.ts';
import { WhiteboardProvider } from './whiteboard.ts';
import { Budget } from '../budget.ts';
import type { CompositeSize } from './media-output.ts';
import { DiskReserve } from './disk-reserve.ts';
import { DiskQuota, setDiskQuota } from './disk-quota.ts';
import { projectRecordingsDir, projectRuns } from './storage.ts';
import { ByteArena } from '../data/byte-arena.ts';

/** Where the local providers put what they produce. */
export interface ProviderSettings {
  recordingsDir: string;
  hlsDir: string;
  hlsSegmentSeconds: number;
  transcriptionUrl?: string;
  /** The local transcription engine's pocketsphinx model directory (Debian's `pocketsphinx-en-us` by default). */
  asrModel?: string;
  /** Caps of the relay's speech recognisers (per room, per project, per relay, start pacing). */
  transcriptionLimits?: RecogniserLimits;
  /** The ffmpeg of the media outputs (a path, or a name on `PATH`; default `ffmpeg`). */
  ffmpeg?: string;
  /** The stage composite's picture (`--composite`; default 720p at 25 fps). */
  composite?: CompositeSize;
  /** Bytes of shapes one whiteboard keeps. */
  whiteboardBytes: number;
  /** Bytes of messages one recording's timeline keeps. */
  recordingTimelineBytes?: number;
  /** Let livestreams go to loopback and private addresses (`--allow-private-rtmp`). */
  allowPrivateRtmp?: boolean;
  /** How long an output may take to start (ms); the livestream gives up a little before, with its own reason. */
  outputStartTimeoutMs?: number;
  /** Free bytes recordings and HLS leave on their disks (`--disk-min-free`, read at each look). */
  diskMinFree?: number;
  /** Bytes one project's recordings and HLS may take on this relay's disks (`--disk-quota`, read at each look; 0: no quota). */
  diskQuota?: number;
}

/** The per-project quota of recordings and HLS under these settings' directories. */
function projectQuota(settings: ProviderSettings): DiskQuota {
  const quota = new DiskQuota(
    () => settings.diskQuota ?? DEFAULTS.diskQuota,
    async (project) => {
      const recordings = await projectRecordingsDir(settings.recordingsDir, project);
      return [...(recordings === null ? [] : [recordings]), ...projectRuns(settings.hlsDir, project)];
    },
  );
  // the server API's deletions give the bytes back
  setDiskQuota(settings, quota);
  return quota;
}

/**
 * The relay's provider of each output. Replace an entry to plug in another implementation.
 * `whiteboards` is the relay-wide budget of whiteboard shapes, `arena` the memory they are kept in,
 * `projects` how many projects the relay serves (the recognisers' per-project cap applies past one).
 */
export function localProviders(settings: ProviderSettings, whiteboards: Budget = new Budget(Infinity), arena: ByteArena = new ByteArena(), projects?: () => number): ProviderFactories {
  const recognisers = new RecogniserPool(settings.transcriptionLimits, undefined, projects);
  const disk = new DiskReserve(() => settings.diskMinFree ?? DEFAULTS.diskMinFree);
  const quota = projectQuota(settings);
  return {
    recording: (ctx, failed) => new RecordingProvider(ctx, settings.recordingsDir, failed, { ffmpeg: settings.ffmpeg, size: settings.composite, owner: settings, disk, quota }, settings.recordingTimelineBytes),
    hls: (ctx, failed) => new HlsProvider(ctx, settings.hlsDir, failed, { segmentSeconds: settings.hlsSegmentSeconds, ffmpeg: settings.ffmpeg, size: settings.composite, owner: settings, disk, quota }),
    livestream: (ctx, failed) =>
      new LivestreamProvider(ctx, failed, {
        allowPrivateRtmp: settings.allowPrivateRtmp ?? false,
        deadlineMs: settings.outputStartTimeoutMs ?? DEFAULTS.outputStartTimeoutMs,
        ...(settings.ffmpeg ? { ffmpeg: settings.ffmpeg } : {}),
        ...(settings.composite ? { size: settings.composite } : {}),
      }),
    transcription: (ctx) => new TranscriptionProvider(ctx, { ffmpeg: settings.ffmpeg, url: settings.transcriptionUrl, asrModel: settings.asrModel, pool: recognisers }),
    whiteboard: (ctx) => new WhiteboardProvider(ctx, new Budget(settings.whiteboardBytes, whiteboards), arena),
  };
}
