/** Wire types of the lobby, moderation requests, room outputs and the whiteboard. */
import type { GrantFlag, Source } from './grant.ts';
import type { ReceivedError } from './codes.ts';
import type { TranscriptionEngine } from './transcript.ts';

/** A joiner waiting in the lobby, as moderators see it. */
export interface LobbyRequest {
  participantId: string;
  name: string;
  /** Unix milliseconds at which it started waiting. */
  requestedAt: number;
}

/** How a lobby request ended. */
export type LobbyOutcome = 'admitted' | 'denied' | 'timeout' | 'cancelled';

/** The answer for one id of a `lobby.admit` / `lobby.deny` (its error as received: see {@link ReceivedError}). */
export type LobbyDecision = { participantId: string; ok: true } | { participantId: string; ok: false; error: ReceivedError };

/** The room outputs, each started and stopped with its own grant flag. */
export type OutputName = 'recording' | 'hls' | 'livestream' | 'transcription' | 'whiteboard';
/** Every output, in a fixed order. */
/** Ids one `lobby.admit` or `lobby.deny` request decides (the SDK splits longer lists). */
export const MAX_LOBBY_DECISIONS = 100;

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

/** What each output may be started with. */
export interface OutputOptions {
  recording: Record<string, never>;
  hls: {
    /** Target length of a segment, in seconds (0.5 to 30; the relay's `--hls-segment` by default). */
    segmentSeconds?: number;
  };
  livestream: {
    /** Where to push: `rtmp[s]://host[:port]/app/streamKey`. */
    url: string;
  };
  transcription: {
    /** The spoken language, as a BCP 47 tag (e.g. `en`, `en-US`); `en` by default. */
    language?: string;
    /** Where speech is recognised; by default `service` when the relay has a `--transcription-url`, else `local`. */
    engine?: TranscriptionEngine;
  };
  whiteboard: Record<string, never>;
}

/** What a file of a recording holds: the stage composite (MP4), one published track (WebM), or the timeline (JSON Lines). */
export type RecordingFileKind = 'composite' | 'track' | 'timeline';

/** One file of a stopped recording, as listed in its `info.files`. */
export interface RecordingFile {
  /** The file's name in the recording, e.g. `composite.mp4`. */
  name: string;
  kind: RecordingFileKind;
  /** Bytes. */
  size: number;
  /** Where to download it (needs a `canRecord` token of the room). */
  url: string;
}

/** What each output tells about its product (paths on the relay's HTTP port). */
export interface OutputInfo {
  recording: {
    /** The recording's id. */
    recording: string;
    /** The timeline's file name. */
    file: string;
    /** Where to download the timeline (needs a `canRecord` token of the room). */
    url: string;
    /** Every file of the recording, once it has stopped (`output-changed` for `stopped`). */
    files?: RecordingFile[];
  };
  hls: {
    /** The master playlist (`.m3u8`: the H.264 + AAC stream and the stage's WebVTT subtitles); only members with `canSubscribe` or `canHls` see it. */
    playlist: string;
  };
  livestream: {
    /** The RTMP server it pushes to. */
    server: string;
    /** The stream key, shortened (never shown whole). */
    key: string;
  };
  transcription: {
    /** The language speech is recognised as. */
    language: string;
    /** Where speech is recognised. */
    engine: TranscriptionEngine;
  };
  whiteboard: {
    /** Bytes of shapes the board keeps. */
    maxBytes: number;
  };
}

/** An output's state and what it produces (e.g. the HLS playlist's path). */
export interface OutputStatus<O extends OutputName = OutputName> {
  state: OutputState;
  /** Who last started or stopped it. */
  by?: string;
  /** Why it failed, when it did (as received: a newer relay's code keeps its string). */
  error?: ReceivedError;
  /** Where to find what it produces, when active (and a recording's files once it has stopped). */
  info?: OutputInfo[O];
}

/** The state of every output, by name. */
export type OutputStatuses = { [O in OutputName]: OutputStatus<O> };

/** An output's status with its name: one member per output, so that `info` follows `output`. */
export type OutputChange = { [O in OutputName]: OutputStatus<O> & { output: O } }[OutputName];

/** The parameters of `output.start`: one member per output, so that `options` follows `output`. */
export type OutputStartParams = { [O in OutputName]: { output: O; options?: OutputOptions[O] } }[OutputName];

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
  'output.start': { params: OutputStartParams; result: OutputStatus };
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
  'output-changed': OutputChange;
  /** To everyone: a shape was drawn. */
  'whiteboard-shape': Shape;
  /** To everyone: the board was cleared. */
  'whiteboard-cleared': { by: string };
}
