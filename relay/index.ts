/** The relay as a library (tests, benchmarks and embedding). */
export { startRelay, type Relay, type RelayOptions } from './server.ts';
export { KeyStore, readKeysFile } from './token/keys.ts';
export { verifyToken, checkScope } from './token/verify.ts';
export { DEFAULTS, type RelayConfig } from './config.ts';
export { main } from './cli.ts';
