/**
 * `tessera/server`: for your backend (Node only). Token minting, the relay's server API
 * (`RoomService`) and its webhooks (`WebhookReceiver`). The secret stays here.
 * @packageDocumentation
 */
export { mintToken, parseTtl, type MintOptions } from './mint.ts';
export { RoomService, type RoomServiceOptions, type ListParticipantsOptions, type PublishDataOptions } from './room-service.ts';
export { WebhookReceiver, type WebhookReceiverOptions } from './webhook-receiver.ts';
export type { Grant, JoinPolicy, Source, TokenClaims } from '../protocol/grant.ts';
export type { RoomSummary, RoomPage, ParticipantPage, PublishResult, WebhookEvent, WebhookEventName, WebhookEventData } from '../protocol/server-api.ts';
export { ADMIN_ACTOR, WEBHOOK_EVENTS } from '../protocol/server-api.ts';
export { SdkError } from '../errors.ts';
export { tokenCommand } from './token-cli.ts';
export { DEV_API_KEY, devKeysPath, loadOrCreateDevKeys } from './dev-keys.ts';
export { ErrorCode, ErrorKind } from '../protocol/codes.ts';
