/**
 * `tessera/server`: token minting for your backend (Node only). The secret stays here.
 * @packageDocumentation
 */
export { mintToken, parseTtl, type MintOptions } from './mint.ts';
export type { Grant, JoinPolicy, Source, TokenClaims } from '../protocol/grant.ts';
export { SdkError } from '../errors.ts';
export { tokenCommand } from './token-cli.ts';
export { DEV_API_KEY, devKeysPath, loadOrCreateDevKeys } from './dev-keys.ts';
export { ErrorCode, ErrorKind } from '../protocol/codes.ts';
