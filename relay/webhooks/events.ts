/**
 * The room events that become webhooks: built from what rooms report (`RoomObserver`), for
 * projects with a webhook URL (their own `webhookUrl`, else `--webhook-url`), and queued per
 * room. Building one costs a `JSON.stringify` of a small object; nothing here waits.
 */
import { randomUUID } from 'node:crypto';
import type { LobbyRequest, OutputChange, OutputInfo } from '../../src/protocol/control.ts';
import type { WebhookEvent, WebhookEventData, WebhookEventName } from '../../src/protocol/server-api.ts';
import type { Member, Room, RoomObserver } from '../rooms/types.ts';
import type { KeyStore } from '../token/keys.ts';
import type { WebhookQueues } from './queue.ts';
import { signWebhook } from './sign.ts';

/** Turns room events into queued webhooks. */
export class WebhookObserver implements RoomObserver {
  /** The last product of a recording that is running, by room: what `recording-ready` tells when it stops. */
  private readonly recordings = new WeakMap<Room, OutputInfo['recording']>();
  /** The id of each room's queued `room-started` (see `roomFinished`). */
  private readonly starts = new WeakMap<Room, string>();

  constructor(
    private readonly keys: KeyStore,
    private readonly defaultUrl: string | undefined,
    private readonly queues: WebhookQueues,
  ) {}

  /** Queue `event` of `room` (if its project takes webhooks); its id, or null when not queued. */
  private emit<E extends WebhookEventName>(room: Room, event: E, data: WebhookEventData[E], viewer = false): string | null {
    const hooks = this.keys.hooks(room.project);
    const url = hooks?.webhookUrl ?? this.defaultUrl;
    if (!url || (viewer && !hooks?.webhookViewers)) return null;
    const envelope = { id: randomUUID(), event, createdAt: Date.now(), project: room.project, roomId: room.id, data } as WebhookEvent;
    const body = JSON.stringify(envelope);
    const { keys } = this;
    const project = room.project;
    this.queues.push(project, room.id, {
      id: envelope.id,
      url,
      body,
      // signed at each attempt, with the project's key of that moment (a rotation or a revocation applies)
      authorization() {
        const signer = keys.hooks(project)?.signer;
        return signer ? signWebhook(body, signer.apiKey, signer.key) : null;
      },
    });
    return envelope.id;
  }

  roomStarted(room: Room): void {
    const id = this.emit(room, 'room-started', { createdAt: room.createdAt });
    if (id) this.starts.set(room, id);
  }

  roomFinished(room: Room): void {
    // a room whose start has not gone out yet is not told at all (see `forgetUnsent`)
    const started = this.starts.get(room);
    if (started && this.queues.forgetUnsent(room.project, room.id, started)) return;
    this.emit(room, 'room-finished', { createdAt: room.createdAt });
  }

  participantJoined(room: Room, member: Member): void {
    this.emit(room, 'participant-joined', { participant: summary(member) }, member.tier === 'viewer');
  }

  participantLeft(room: Room, member: Member): void {
    this.emit(room, 'participant-left', { participant: summary(member) }, member.tier === 'viewer');
  }

  lobbyRequest(room: Room, request: LobbyRequest): void {
    this.emit(room, 'lobby-request', request);
  }

  outputChanged(room: Room, change: OutputChange): void {
    this.emit(room, 'output-changed', change);
    if (change.output !== 'recording') return;
    if (change.info) this.recordings.set(room, change.info);
    if (change.state === 'stopped') {
      const info = change.info ?? this.recordings.get(room);
      this.recordings.delete(room);
      if (info) this.emit(room, 'recording-ready', { recording: info });
    } else if (change.state === 'failed') this.recordings.delete(room);
  }
}

function summary(member: Member): WebhookEventData['participant-joined']['participant'] {
  return { id: member.id, name: member.name, tier: member.tier, joinedAt: member.joinedAt };
}
