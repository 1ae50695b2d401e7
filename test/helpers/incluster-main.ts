/**
 * Test entry point: runs the real manager command (cmd/manager/cli.ts) with its in-cluster ServiceAccount directory
 * moved under `$TSCM_TEST_IN_CLUSTER_ROOT`, so tests run the manager "in-cluster style" without touching the
 * machine's real /var/run/secrets. Only this test helper reads that variable; the production entry point
 * (cmd/manager/main.ts) has no such seam.
 */
import { main } from '../../cmd/manager/cli.ts';

main(process.argv.slice(2), process.env, { inClusterRoot: process.env['TSCM_TEST_IN_CLUSTER_ROOT'] ?? '' }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
