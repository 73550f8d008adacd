export * from './codes.ts';
export * from './grant.ts';
export * from './messages.ts';
export * from './control.ts';
export * from './media.ts';
export * from './transcript.ts';
