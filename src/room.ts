import type { Connection } from './connection.ts';
import { Emitter, type Listener } from './emitter.ts';
import { SdkError } from './errors.ts';
import { DataStreams } from './data/data-stream.ts';
import { PubSub } from './data/pubsub.ts';
import { Lobby } from './lobby/lobby.ts';
import { Media } from './media/media.ts';
import type { MediaPlatform } from './media/platform.ts';
import { Moderation } from './moderation/moderation.ts';
import { OutputControl, WhiteboardControl } from './outputs/outputs.ts';
import { OUTPUTS, type OutputChange, type OutputName } from './protocol/control.ts';
import type { DisconnectReason } from './protocol/codes.ts';
import type { EventFrame, JoinedFrame, ParticipantCounts, ServerEventName, ServerEvents } from './protocol/messages.ts';
import { LocalParticipant } from './participants/local-participant.ts';
import { Participants, type GetParticipantsOptions, type ParticipantPage } from './participants/participants.ts';
import type { RemoteParticipant } from './participants/remote-participant.ts';
import type { RoomEvents } from './room-events.ts';

type EventHandlers = { [E in ServerEventName]: (data: ServerEvents[E]) => void };

/**
 * A joined room: a thin front over its managers. Obtain one with `Sdk.join()`.
 *
 * @example
 * ```ts
 * const room = await Sdk.join({ url, token });
 * room.on('participant-joined', ({ participant }) => addTile(participant));
 * room.on('participant-count-changed', ({ viewer }) => showAudience(viewer));
 * room.on('disconnected', ({ reason }) => showEnded(reason));
 * ```
 */
export class Room {
  /** The room's id. */
  readonly id: string;
  /** You. */
  readonly localParticipant: LocalParticipant;
  /** Topic messages with targeting and history. */
  readonly pubsub: PubSub;
  /** Data of any size, chunked, with flow control. */
  readonly dataStream: DataStreams;
  /** The lobby, for moderators. */
  readonly lobby: Lobby;
  /** Server-side recording (`canRecord`). */
  readonly recording: OutputControl<'recording'>;
  /** HLS output (`canHls`). */
  readonly hls: OutputControl<'hls'>;
  /** RTMP livestream (`canLivestream`): `start({ url: 'rtmp://…' })`. */
  readonly livestream: OutputControl<'livestream'>;
  /** Transcription (`canTranscribe`). */
  readonly transcription: OutputControl<'transcription'>;
  /** The shared whiteboard (`canWhiteboard` to start, draw and clear). */
  readonly whiteboard: WhiteboardControl;
  private readonly outputs: { [O in OutputName]: OutputControl<O> };
  private readonly events: Emitter<RoomEvents>;
  private readonly participants: Participants;
  private readonly moderation: Moderation;
  private readonly media: Media;
  private readonly handlers: EventHandlers;
  private ended: DisconnectReason | null = null;

  /** @internal */
  constructor(
    private readonly connection: Connection,
    joined: JoinedFrame,
    options: { platform: () => MediaPlatform; autoSubscribe: boolean },
  ) {
    this.id = joined.roomId;
    this.moderation = new Moderation(connection);
    this.pubsub = new PubSub(connection);
    this.dataStream = new DataStreams(connection);
    this.lobby = new Lobby(connection, joined.lobby ?? []);
    this.recording = new OutputControl('recording', connection, joined.outputs.recording);
    this.hls = new OutputControl('hls', connection, joined.outputs.hls);
    this.livestream = new OutputControl('livestream', connection, joined.outputs.livestream);
    this.transcription = new OutputControl('transcription', connection, joined.outputs.transcription);
    this.whiteboard = new WhiteboardControl('whiteboard', connection, joined.outputs.whiteboard);
    this.outputs = { recording: this.recording, hls: this.hls, livestream: this.livestream, transcription: this.transcription, whiteboard: this.whiteboard };
    this.events = new Emitter<RoomEvents>({
      'participant-joined': () => this.participants.joinedReplay(),
      'lobby-request': () => this.lobby.pending,
    });
    this.media = new Media(connection, this.events, options.platform, options.autoSubscribe, (id) => this.participants.view.get(id));
    this.localParticipant = new LocalParticipant(joined.self, this.media);
    const media = this.media;
    this.participants = new Participants(
      connection,
      this.events,
      this.moderation,
      {
        appeared: (participant, info) => {
          for (const track of info.tracks ?? []) media.added(participant, track, false);
        },
        synced: (participant, info) => media.sync(participant, info.tracks ?? []),
        gone: (participant) => media.participantLeft(participant),
      },
      joined.participants,
      joined.counts,
      joined.self.id,
    );
    this.handlers = {
      'participant-joined': (info) => this.participants.joined(info),
      'participant-left': ({ id }) => this.participants.left(id),
      'participant-count-changed': (counts) => this.participants.countChanged(counts),
      'pubsub.message': (message) => this.pubsub.deliver(message),
      'stream.open': (info) => this.dataStream.opened(info),
      'stream.end': ({ streamId }) => this.dataStream.ended(streamId),
      'stream.abort': ({ streamId, error }) => this.dataStream.aborted(streamId, error),
      'stream.ack': ({ streamId, seq }) => this.dataStream.acked(streamId, seq),
      'lobby-request': (request) => {
        if (this.lobby.requested(request)) this.events.emit('lobby-request', request);
      },
      'lobby-resolved': (data) => {
        this.lobby.resolved(data.participantId);
        this.events.emit('lobby-resolved', data);
      },
      'unpublish-requested': (data) => this.events.emit('unpublish-requested', data),
      'output-changed': (data) => {
        if (!OUTPUTS.includes(data.output)) return;
        const { output, ...status } = data;
        (this.outputs[output] as OutputControl).changed(status);
        this.events.emit('output-changed', data);
      },
      'whiteboard-shape': (shape) => this.events.emit('whiteboard-shape', { shape }),
      'whiteboard-cleared': (data) => this.events.emit('whiteboard-cleared', data),
      'track-published': (info) => this.media.published(info),
      'track-unpublished': ({ participantId, source }) => this.media.unpublished(participantId, source),
      'track-mute': ({ participantId, source, muted }) => this.media.muteChanged(participantId, source, muted),
      'subscription-ended': ({ subscriptionId }) => this.media.subscriptionEnded(subscriptionId),
      'force-unpublished': ({ source, by }) => this.media.forced(source, by),
      transcription: (transcript) => this.events.emit('transcription', transcript),
    };
    this.participants.start(joined.participants);
    connection.attach({
      reconnecting: () => {
        this.dataStream.interrupted();
        this.events.emit('reconnecting', {});
      },
      waiting: (info) => this.events.emit('reconnect-waiting', info),
      reconnected: (fresh) => void this.reconcile(fresh).catch((error: unknown) => this.fault('bringing the room up to date after reconnecting', error)),
      event: (frame) => this.onEvent(frame),
      error: (error) => this.events.emit('error', { error }),
      binary: (frame) => this.dataStream.chunk(frame),
      closed: (reason) => this.onClosed(reason),
    });
  }

  /**
   * The on-stage participants other than you, by id, in join order; viewers are never in it.
   * A `Map` (`instanceof Map`) kept by the SDK: `set`, `delete` and `clear` throw.
   *
   * @example
   * ```ts
   * for (const [id, participant] of room.remoteParticipants) render(id, participant.name);
   * ```
   */
  get remoteParticipants(): ReadonlyMap<string, RemoteParticipant> {
    return this.participants.view;
  }

  /** The latest `{ speaker, viewer, total }` of the room, you included. */
  get participantCount(): ParticipantCounts {
    return this.participants.counts;
  }

  /** Whether the session is still live. */
  get connected(): boolean {
    return this.ended === null;
  }

  /** Add a listener; returns a function that removes it. */
  on<E extends keyof RoomEvents>(event: E, listener: Listener<RoomEvents[E]>): () => void {
    return this.events.on(event, listener);
  }

  /** Add a listener called at most once. */
  once<E extends keyof RoomEvents>(event: E, listener: Listener<RoomEvents[E]>): () => void {
    return this.events.once(event, listener);
  }

  /** Remove a listener. */
  off<E extends keyof RoomEvents>(event: E, listener: Listener<RoomEvents[E]>): void {
    this.events.off(event, listener);
  }

  /**
   * One page of the participants of a tier, in join order. Walk the audience with the cursor;
   * a participant present for the whole walk appears exactly once.
   *
   * @example
   * ```ts
   * let cursor: string | null = null;
   * do {
   *   const page = await room.getParticipants({ tier: 'viewer', limit: 500, cursor });
   *   page.participants.forEach(addRow);
   *   cursor = page.nextCursor;
   * } while (cursor);
   * ```
   */
  getParticipants(options: GetParticipantsOptions): Promise<ParticipantPage> {
    return this.participants.page(options);
  }

  /** Remove a participant by id (viewers included). Needs `canModerate`. */
  remove(participantId: string): Promise<void> {
    return this.moderation.remove(participantId);
  }

  /** End the room for everyone. Needs `canModerate`. */
  end(): Promise<void> {
    return this.moderation.end();
  }

  /**
   * Leave the room: the relay is asked to take you out and answers (a round trip; at most 2 s
   * when it does not), then `disconnected` (reason `left`) is emitted and the socket closes; the
   * promise resolves once it has. Events that arrive before the answer are still delivered.
   * While the SDK is reconnecting the relay cannot be told: your seat is held for the relay's
   * resume grace (15 s by default) and then given up, as for a dropped connection.
   *
   * @example
   * ```ts
   * window.addEventListener('pagehide', () => void room.leave());
   * ```
   */
  leave(): Promise<void> {
    return this.connection.leave();
  }

  /**
   * The connection is back: bring every part of the room up to the relay's view. Each part is
   * brought up on its own: one that fails (reported as `error`) does not leave the others stale,
   * topics unsubscribed or media down, and `reconnected` still comes.
   */
  private async reconcile(joined: JoinedFrame): Promise<void> {
    this.guarded('the participants after reconnecting', () => this.participants.reconcile(joined.participants, joined.counts));
    this.guarded('the lobby after reconnecting', () => {
      for (const request of this.lobby.reconcile(joined.lobby ?? [])) this.events.emit('lobby-request', request);
    });
    this.guarded('the outputs after reconnecting', () => {
      for (const output of OUTPUTS) {
        const now = joined.outputs[output];
        const was = this.outputs[output].status;
        if (now && (now.state !== was.state || now.by !== was.by)) {
          (this.outputs[output] as OutputControl).changed(now);
          this.events.emit('output-changed', { output, ...now } as OutputChange);
        }
      }
    });
    const settle = (what: string, run: () => Promise<void>) => Promise.resolve().then(run).catch((error: unknown) => this.fault(what, error));
    await Promise.all([settle('the topics after reconnecting', () => this.pubsub.resubscribe()), settle('the media after reconnecting', () => this.media.reestablish())]);
    this.events.emit('reconnected', { resumed: joined.resumed === true });
  }

  /** Run one part of the room's upkeep; if it throws, that is reported and the other parts go on. */
  private guarded(what: string, run: () => void): void {
    try {
      run();
    } catch (error) {
      this.fault(what, error);
    }
  }

  /** A fault of the SDK's own, reported as the room's `error` (never thrown into the page). */
  private fault(what: string, error: unknown): void {
    const sdkError = error instanceof SdkError ? error : new SdkError('INTERNAL_ERROR', `${what}: ${error instanceof Error ? error.message : String(error)}`, { reason: 'internal' });
    this.events.emit('error', { error: sdkError });
  }

  private onEvent(frame: EventFrame): void {
    const handler = this.handlers[frame.name] as ((data: unknown) => void) | undefined;
    handler?.(frame.data);
  }

  private onClosed(reason: DisconnectReason): void {
    if (this.ended) return;
    this.ended = reason;
    // each part lets go on its own: one that throws must not keep devices captured or `disconnected` unsaid
    this.guarded('closing the data streams', () => this.dataStream.closed());
    this.guarded('releasing the media', () => this.media.closed());
    this.events.emit('disconnected', { reason });
    this.events.clear();
  }
}
