/**
 * Resume credentials of a cluster node: `node.project.room.secret.tag`. The node (where the seat
 * is while it lives) and the room (where its next home restored it once the node is gone) let any
 * node find the seat; the tag, an HMAC of the rest under the key the nodes share in Redis, lets a
 * node refuse a forged credential before it asks Redis or another node anything. Without it, a
 * resume frame (which needs no token) naming any node and room made the node look the room up:
 * how long the refusal took told whether a room existed, in any project.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { isId } from '../../src/protocol/parse.ts';
import type { Room } from '../rooms/types.ts';

/** Where a credential's seat is: its node, and the room (project and id). */
export interface CredentialPlace {
  node: string;
  project: string;
  roomId: string;
}

/** Bytes of HMAC-SHA256 kept in the tag: 128 bits. */
const TAG_BYTES = 16;

const b64 = (text: string) => Buffer.from(text).toString('base64url');

/** What the credential of a seat in `room` on `node` starts with (its random secret follows). */
export function credentialPrefix(node: string, room: Pick<Room, 'project' | 'id'>): string {
  return `${node}.${b64(room.project)}.${b64(room.id)}.`;
}

function tag(key: Buffer, unsigned: string): Buffer {
  return createHmac('sha256', key).update('tessera-resume\0').update(unsigned).digest().subarray(0, TAG_BYTES);
}

/** The credential `unsigned` (prefix and secret) with its tag under `key`. */
export function sealCredential(key: Buffer, unsigned: string): string {
  return `${unsigned}.${tag(key, unsigned).toString('base64url')}`;
}

/** Whether `credential`'s tag was made with one of `keys` (the cluster's key now, and the one before it). */
export function credentialSealed(keys: readonly Buffer[], credential: string): boolean {
  const dot = credential.lastIndexOf('.');
  if (dot < 0) return false;
  const given = Buffer.from(credential.slice(dot + 1), 'base64url');
  if (given.length !== TAG_BYTES) return false;
  const unsigned = credential.slice(0, dot);
  let ok = false;
  for (const key of keys) ok = timingSafeEqual(tag(key, unsigned), given) || ok;
  return ok;
}

/** The node and room a credential names, if it has the form of a cluster's (its tag is not checked here). */
export function credentialPlace(credential: string): CredentialPlace | null {
  const parts = credential.split('.');
  if (parts.length !== 5) return null;
  const [node, project, roomId, secret, sealed] = parts as [string, string, string, string, string];
  if (!node || !secret || !sealed) return null;
  const place = { node, project: Buffer.from(project, 'base64url').toString('utf8'), roomId: Buffer.from(roomId, 'base64url').toString('utf8') };
  return isId(place.roomId) && place.project.length > 0 && place.project.length <= 256 ? place : null;
}
