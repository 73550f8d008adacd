import type { LobbyRequest, OutputChange } from '../../src/protocol/control.ts';
import type { Room, RoomObserver } from './types.ts';
import type { Member } from './member.ts';
import type { KeptMessage } from '../data/topics.ts';

/**
 * Several observers of the rooms as one (the webhooks, and on a cluster the room's record in
 * Redis); one that throws does not keep the others from being told.
 */
export class RoomObservers implements RoomObserver {
  private readonly all: RoomObserver[];

  constructor(...observers: RoomObserver[]) {
    this.all = observers;
  }

  private quiet = 0;
  private muted = false;

  add(observer: RoomObserver): void {
    this.all.push(observer);
  }

  /**
   * Run `fn` without telling anyone what it does to rooms: a room a cluster node restores from
   * its record after its home died did not start, and its members did not join.
   */
  quietly<T>(fn: () => T): T {
    this.quiet++;
    try {
      return fn();
    } finally {
      this.quiet--;
    }
  }

  /** Tell nobody anything from now on: the node is shutting down, and its rooms live on elsewhere. */
  mute(): void {
    this.muted = true;
  }

  private each(tell: (o: RoomObserver) => void): void {
    if (this.quiet > 0 || this.muted) return;
    for (const o of this.all) {
      try {
        tell(o);
      } catch {
        // an observer's fault is its own: the room goes on
      }
    }
  }

  roomStarted(room: Room): void {
    this.each((o) => o.roomStarted(room));
  }
  roomFinished(room: Room): void {
    this.each((o) => o.roomFinished(room));
  }
  participantJoined(room: Room, member: Member): void {
    this.each((o) => o.participantJoined(room, member));
  }
  participantLeft(room: Room, member: Member): void {
    this.each((o) => o.participantLeft(room, member));
  }
  lobbyRequest(room: Room, request: LobbyRequest): void {
    this.each((o) => o.lobbyRequest(room, request));
  }
  outputChanged(room: Room, change: OutputChange): void {
    this.each((o) => o.outputChanged(room, change));
  }
  get wantsHistory(): boolean {
    return this.all.some((o) => o.wantsHistory === true);
  }
  historyKept(room: Room, message: KeptMessage): void {
    this.each((o) => o.historyKept?.(room, message));
  }
  historyForgotten(room: Room, seq: number): void {
    this.each((o) => o.historyForgotten?.(room, seq));
  }

  identityReleased(room: Room, participantId: string): void {
    this.each((o) => o.identityReleased?.(room, participantId));
  }
}
