#!/usr/bin/env node
import { main } from '../dist/relay.mjs';

main(process.argv.slice(2), process.env).catch((err) => {
  process.stderr.write(`tessera-relay: ${err?.stack ?? err}\n`);
  process.exit(1);
});
