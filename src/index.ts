/**
 * Tessera: real-time audio/video rooms whose whole authorization model is one signed token.
 * @packageDocumentation
 */
export { Sdk, type JoinOptions } from './sdk.ts';
export type { ReconnectPolicy } from './connection.ts';
export { SdkError, type AnyErrorCode } from './errors.ts';
export { ERROR_REASONS, ErrorCode, ErrorKind, type DisconnectReason, type ErrorReason } from './protocol/codes.ts';
export { Room } from './room.ts';
export type { RoomEvents, RoomEventName } from './room-events.ts';
export { LocalParticipant } from './participants/local-participant.ts';
export { RemoteParticipant } from './participants/remote-participant.ts';
export type { GetParticipantsOptions, ParticipantPage } from './participants/participants.ts';
export { PubSub, type PublishOptions, type HistoryOptions, type Published, type MessageHandler } from './data/pubsub.ts';
export { DataStreams, type StreamSendOptions, type StreamSent, type DataStreamEvents } from './data/data-stream.ts';
export { IncomingStream } from './data/incoming-stream.ts';
export type { ReadOptions } from './data/incoming-stream.ts';
export { Lobby } from './lobby/lobby.ts';
export { LocalTrackPublication, RemoteTrackPublication } from './media/publications.ts';
export type { MediaPlatform } from './media/platform.ts';
export type { TrackKind, TrackInfo, PreferredSize } from './protocol/media.ts';
export type { PublishTrackOptions } from './media/media.ts';
export type { TrackEvent } from './room-events.ts';
export { OutputControl, WhiteboardControl, type OutputStartArgs } from './outputs/outputs.ts';
export type {
  LobbyDecision,
  LobbyOutcome,
  LobbyRequest,
  OutputChange,
  OutputInfo,
  RecordingFile,
  RecordingFileKind,
  OutputName,
  OutputOptions,
  OutputState,
  OutputStatus,
  OutputStatuses,
  Shape,
  ShapeInput,
} from './protocol/control.ts';
export type { JsonValue, PubSubMessage } from './protocol/messages.ts';
export type { Transcript, TranscriptionEngine } from './protocol/transcript.ts';
export type { EffectiveGrant, Grant, GrantFlag, JoinPolicy, Source } from './protocol/grant.ts';
export type { ReceivedError, WireError } from './protocol/codes.ts';
export type { ParticipantCounts, ParticipantSummary, Tier } from './protocol/messages.ts';
export type { Listener } from './emitter.ts';
