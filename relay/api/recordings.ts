/**
 * Deleting a recording through the server API (`DELETE /api/v1/rooms/:room/recordings/:id`):
 * the integrator's way to free its project's disk quota on the relay. Only a finished recording
 * of exactly the caller's project and room, found as downloads find it (`storage.ts`: level by
 * level, the relay's own directories, never a link).
 */
import { isId } from '../../src/protocol/parse.ts';
import type { RelayContext } from '../context.ts';
import { RelayError } from '../errors.ts';
import { diskQuotaOf } from '../outputs/disk-quota.ts';
import { deleteRecording, RECORDING_ID, UnsafeStorageError } from '../outputs/storage.ts';

/**
 * Delete recording `id` of `project`'s room `roomId` on this relay. `NOT_FOUND`
 * (`unknown-recording`) when there is none here (another project's, a malformed id, a path);
 * `INVALID_STATE` (`recording-active`) while it is being written.
 */
export async function deleteRecordingHere(relay: RelayContext, project: string, roomId: string, id: string): Promise<Record<string, never>> {
  const missing = () => new RelayError('NOT_FOUND', `no recording "${id.slice(0, 64)}" of room "${roomId.slice(0, 128)}" on this relay`, 'unknown-recording');
  if (!isId(roomId) || !RECORDING_ID.test(id)) throw missing();
  let done: Awaited<ReturnType<typeof deleteRecording>>;
  try {
    done = await deleteRecording(relay.config.recordingsDir, project, roomId, id);
  } catch (err) {
    if (!(err instanceof UnsafeStorageError)) throw err;
    relay.log.error('recordings directory refused', { error: err.message });
    throw new RelayError('INTERNAL_ERROR', 'the relay cannot read its recordings directory: it is not private (see the relay log)', 'unsafe-storage');
  }
  if (!done.deleted) {
    if (done.why === 'writing') throw new RelayError('INVALID_STATE', 'this recording is still being written: stop it first (the files are final once recording-ready is sent)', 'recording-active');
    throw missing();
  }
  diskQuotaOf(relay.config)?.freed(project, done.bytes);
  relay.log.info('recording deleted', { project, room: roomId, recording: id, bytes: done.bytes });
  return {};
}
