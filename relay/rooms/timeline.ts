import type { Transcript } from '../../src/protocol/transcript.ts';

/** What happens in a room, as outputs (recording, HLS captions, livestream data) see it. */
export type TimelineEvent =
  | { type: 'participant-joined'; participantId: string; name: string; tier: 'speaker' | 'viewer' }
  | { type: 'participant-left'; participantId: string; tier: 'speaker' | 'viewer' }
  | { type: 'message'; topic: string; from: string; payload: unknown; id: string }
  | { type: 'stream'; from: string; size: number; kind: string; name?: string; topic?: string }
  | { type: 'output'; output: string; state: string; by?: string }
  | { type: 'whiteboard'; action: 'draw' | 'clear'; by: string; shapeId?: string }
  | { type: 'track-recorded'; participantId: string; source: string; kind: string; file: string }
  | ({ type: 'transcription' } & Transcript);

/** A timeline event with the time it happened (unix ms). */
export type TimedEvent = TimelineEvent & { at: number };

/**
 * The room's event tap. Costs nothing while nobody listens; outputs listen while active.
 */
export class Timeline {
  private readonly listeners = new Set<(event: TimedEvent) => void>();

  get listening(): boolean {
    return this.listeners.size > 0;
  }

  on(listener: (event: TimedEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: TimelineEvent): void {
    if (this.listeners.size === 0) return;
    const timed = { ...event, at: Date.now() } as TimedEvent;
    for (const listener of this.listeners) {
      try {
        listener(timed);
      } catch {
        // an output's failure is its own; the room goes on
      }
    }
  }
}
