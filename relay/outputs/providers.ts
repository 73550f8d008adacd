import type { OutputName } from '../../src/protocol/control.ts';
import type { ProviderFactory } from './board.ts';
import { HlsProvider } from './hls.ts';
import { LivestreamProvider } from './livestream.ts';
import { RecordingProvider } from './recording.ts';
import { TranscriptionProvider } from './transcription.ts';
import { WhiteboardProvider } from './whiteboard.ts';

/** Where the local providers put what they produce. */
export interface ProviderSettings {
  recordingsDir: string;
  hlsDir: string;
  hlsSegmentSeconds: number;
  transcriptionUrl?: string;
}

/** The relay's provider of each output. Replace an entry to plug in another implementation. */
export function localProviders(settings: ProviderSettings): Record<OutputName, ProviderFactory> {
  return {
    recording: (ctx, failed) => new RecordingProvider(ctx, settings.recordingsDir, failed),
    hls: (ctx) => new HlsProvider(ctx, settings.hlsDir, settings.hlsSegmentSeconds),
    livestream: (ctx, failed) => new LivestreamProvider(ctx, failed),
    transcription: (ctx) => new TranscriptionProvider(ctx, settings.transcriptionUrl),
    whiteboard: (ctx) => new WhiteboardProvider(ctx),
  };
}
