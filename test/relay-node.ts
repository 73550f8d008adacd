/** A relay node in its own process for tests that kill one: the CLI, run from source. */
import { main } from '../relay/cli.ts';

main(process.argv.slice(2), process.env).catch((err: unknown) => {
  process.stderr.write(`tessera-relay: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
