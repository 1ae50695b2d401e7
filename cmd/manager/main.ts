#!/usr/bin/env node
/**
 * ts-controller-manager entry point (see cli.ts for the order of work and the exit codes). `gen …` runs the code
 * generator instead (pkg/codegen/cli.ts; docs/codegen.md), `dev …` a local control plane (dev.ts; docs/library.md),
 * `envtest …` its binaries (envtest.ts: which are installed, how to get one; docs/testing.md),
 * `init …` and `create api …` the project scaffolding (pkg/scaffold/cli.ts; docs/scaffolding.md). Each is imported only
 * when asked for.
 */
import { main } from './cli.ts';

const argv = process.argv.slice(2);
const command = argv[0] === 'gen'
  ? import('../../pkg/codegen/cli.ts').then(({ genMain }) => genMain(argv.slice(1)))
  : argv[0] === 'dev'
    ? import('./dev.ts').then(({ devMain }) => devMain(argv.slice(1)))
    : argv[0] === 'envtest'
      ? import('./envtest.ts').then(({ envtestMain }) => envtestMain(argv.slice(1)))
      : argv[0] === 'init' || argv[0] === 'create'
        ? import('../../pkg/scaffold/cli.ts').then(({ scaffoldMain }) => scaffoldMain(argv))
        : main(argv, process.env);
command.then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
