import { DEV_API_KEY, loadOrCreateDevKeys } from '../src/server/dev-keys.ts';
import { helpText, parseCli } from './cli-flags.ts';
import { setHeapGrowth } from './heap-growth.ts';
import { createLogger } from './log.ts';
import { startRelay } from './server.ts';
import { KeyStore, readKeysFile } from './token/keys.ts';

/** The `tessera-relay` command. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  let config;
  try {
    config = parseCli(argv, env);
  } catch (err) {
    process.stderr.write(`tessera-relay: ${(err as Error).message}\n`);
    process.exit(2);
  }
  if (config.help) {
    process.stdout.write(helpText());
    return;
  }
  setHeapGrowth(config.heapGrowthPercent);
  const log = createLogger(config.logLevel);
  const keys = new KeyStore();
  const { keysFile } = config;
  if (keysFile) {
    try {
      const file = readKeysFile(keysFile);
      keys.replaceProjects(file.projects);
    } catch (err) {
      process.stderr.write(`tessera-relay: ${(err as Error).message}\n`);
      process.exit(2);
    }
    process.on('SIGHUP', () => {
      try {
        const file = readKeysFile(keysFile);
        keys.replaceProjects(file.projects);
        log.info('keys reloaded', { file: keysFile, keys: keys.size, revoked: file.revoked.length, projects: Object.keys(file.projects).length });
      } catch (err) {
        log.error('keys not reloaded, the previous keys stay in force', { error: (err as Error).message });
      }
    });
  } else {
    // dev mode: a key kept in a file of the user's, shared with `tessera token`
    let dev;
    try {
      dev = env.TESSERA_DEV_SECRET ? { apiKey: DEV_API_KEY, secret: env.TESSERA_DEV_SECRET, path: '(TESSERA_DEV_SECRET)' } : loadOrCreateDevKeys(env);
    } catch (err) {
      process.stderr.write(`tessera-relay: ${(err as Error).message}\n`);
      process.exit(2);
    }
    keys.replace({ [dev.apiKey]: dev.secret });
    process.stdout.write(`dev mode (no --keys): API key "${dev.apiKey}", secret "${dev.secret}" (kept in ${dev.path}; \`npx tessera token\` signs with it)\n`);
  }

  // the last line, not the design: a promise some path let fall (a library's, most likely) is a
  // fault logged and counted (`tessera_faults_total`), not the end of every room of every project
  let faults: { faults: number } = { faults: 0 };
  process.on('unhandledRejection', (reason) => {
    faults.faults++;
    log.error('fault: a promise rejected and nobody handled it; the relay goes on', { error: reason instanceof Error ? (reason.stack ?? reason.message) : String(reason) });
  });
  const relay = await startRelay({ ...config, keys, logger: log });
  // (those of the start count too)
  relay.context.counters.faults += faults.faults;
  faults = relay.context.counters;
  process.stdout.write(`tessera-relay listening on ${relay.url}\n`);
  const stop = () => {
    log.info('shutting down: closing every session with server-shutdown');
    relay.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
