/**
 * `tessera/server`: token minting for your backend (Node only). The secret stays here.
 * @packageDocumentation
 */
export { mintToken, parseTtl, type MintOptions } from './mint.ts';
export type { Grant, JoinPolicy, Source, TokenClaims } from '../protocol/grant.ts';
export { SdkError } from '../errors.ts';
export { ErrorCode, ErrorKind } from '../protocol/codes.ts';
