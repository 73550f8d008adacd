/** Wire types of the lobby, moderation requests, room outputs and the whiteboard. */
import type { GrantFlag, Source } from './grant.ts';
import type { WireError } from './messages.ts';

/** A joiner waiting in the lobby, as moderators see it. */
export interface LobbyRequest {
  participantId: string;
  name: string;
  /** Unix milliseconds at which it started waiting. */
  requestedAt: number;
}

/** How a lobby request ended. */
export type LobbyOutcome = 'admitted' | 'denied' | 'timeout' | 'cancelled';

/** The answer for one id of a `lobby.admit` / `lobby.deny`. */
export type LobbyDecision = { participantId: string; ok: true } | { participantId: string; ok: false; error: WireError };

/** The room outputs, each started and stopped with its own grant flag. */
export type OutputName = 'recording' | 'hls' | 'livestream' | 'transcription' | 'whiteboard';
/** Every output, in a fixed order. */
export const OUTPUTS: readonly OutputName[] = Object.freeze(['recording', 'hls', 'livestream', 'transcription', 'whiteboard']);
/** The flag each output needs. */
export const OUTPUT_FLAGS: Readonly<Record<OutputName, GrantFlag>> = Object.freeze({
  recording: 'canRecord',
  hls: 'canHls',
  livestream: 'canLivestream',
  transcription: 'canTranscribe',
  whiteboard: 'canWhiteboard',
});

/** The life of an output. */
export type OutputState = 'stopped' | 'starting' | 'active' | 'stopping' | 'failed';

/** An output's state and what it produces (e.g. the HLS playlist's path). */
export interface OutputStatus {
  state: OutputState;
  /** Who last started or stopped it. */
  by?: string;
  /** Why it failed, when it did. */
  error?: WireError;
  /** Where to find what it produces (paths on the relay's HTTP port), when active. */
  info?: Record<string, string>;
}

/** A shape on the whiteboard. Coordinates are in board units (0..10000). */
export type ShapeInput =
  | { kind: 'stroke'; points: number[]; color?: string; width?: number }
  | { kind: 'line' | 'rect' | 'ellipse'; x: number; y: number; w: number; h: number; color?: string; width?: number }
  | { kind: 'text'; x: number; y: number; text: string; color?: string; size?: number };

/** A shape as the board keeps it: with its id and author, stamped by the relay. */
export type Shape = ShapeInput & { id: string; by: string };

/** Methods of this part of the protocol. */
export interface ControlMethods {
  'lobby.admit': { params: { participantIds: string[] }; result: { decisions: LobbyDecision[] } };
  'lobby.deny': { params: { participantIds: string[] }; result: { decisions: LobbyDecision[] } };
  'participant.request-unpublish': { params: { participantId: string; source: Source }; result: Record<string, never> };
  'output.start': { params: { output: OutputName; options?: Record<string, unknown> }; result: OutputStatus };
  'output.stop': { params: { output: OutputName }; result: OutputStatus };
  'whiteboard.draw': { params: { shape: ShapeInput }; result: { shape: Shape } };
  'whiteboard.clear': { params: Record<string, never>; result: Record<string, never> };
  'whiteboard.shapes': { params: Record<string, never>; result: { shapes: Shape[] } };
}

/** Events of this part of the protocol. */
export interface ControlEvents {
  /** To moderators: a joiner waits. */
  'lobby-request': LobbyRequest;
  /** To moderators: a request ended. */
  'lobby-resolved': { participantId: string; outcome: LobbyOutcome; by?: string };
  /** To the target: a moderator asks you to stop publishing a source. */
  'unpublish-requested': { source: Source; by: string };
  /** To everyone: an output changed state. */
  'output-changed': OutputStatus & { output: OutputName };
  /** To everyone: a shape was drawn. */
  'whiteboard-shape': Shape;
  /** To everyone: the board was cleared. */
  'whiteboard-cleared': { by: string };
}
