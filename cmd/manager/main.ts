#!/usr/bin/env node
/**
 * ts-controller-manager entry point (see cli.ts for the order of work and the exit codes).
 */
import { main } from './cli.ts';

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
