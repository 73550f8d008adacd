#!/usr/bin/env node
// `npx tessera token ...`: developer tools of the Tessera package.
import { tokenCommand } from '../dist/server.mjs';

const [command, ...rest] = process.argv.slice(2);
if (command === 'token') {
  process.exit(tokenCommand(rest, (s) => process.stdout.write(s), (s) => process.stderr.write(s)));
}
process.stderr.write('Usage: tessera token [options]   (tessera token --help)\n');
process.exit(command === undefined || command === '--help' ? 0 : 2);
