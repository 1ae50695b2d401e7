import { test } from 'node:test';
import { defaultRotationOptions } from '../../pkg/webhook/certs/rotation.ts';
import {
  defaultMaxConnections, defaultMaxInFlightBytes, defaultMaxRequestBytes, defaultMaxRequestsInFlight,
  defaultRequestTimeoutMs,
} from '../../pkg/webhook/server.ts';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  UsageError,
  formatDuration,
  helpText,
  parseBindAddress,
  parseDuration,
  parseOptions,
  resolveControllers,
  webhookServerLimits,
  type Options,
} from './options.ts';

/** A namespace-file path that never exists, so tests never read the real in-cluster file. */
const noFile = { inClusterNamespaceFile: join(tmpdir(), 'ts-cm-options-test-does-not-exist', 'namespace') };

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}): Options => parseOptions(argv, env, noFile);

test('defaults match the documented flag defaults', () => {
  const o = parse([]);
  assert.equal(o.help, false);
  assert.equal(o.kubeconfig, undefined);
  // kubebuilder v4 defaults: metrics off; when enabled, HTTPS with authentication and authorization.
  assert.equal(o.metricsBindAddress, '0');
  assert.equal(o.metricsSecure, true);
  assert.equal(o.metricsCertDir, undefined);
  assert.equal(o.pprofBindAddress, '0', 'profiling off by default (controller-runtime)');
  assert.equal(o.healthProbeBindAddress, ':8081');
  assert.equal(o.webhookBindAddress, ':9443', 'kubebuilder\'s webhook port');
  assert.equal(o.webhookCertPath, undefined);
  assert.equal(o.leaderElect, false);
  assert.equal(o.leaderElectionId, 'ts-controller-manager.samplecontroller.k8s.io');
  assert.equal(o.leaderElectionNamespace, undefined);
  assert.equal(o.leaseDurationMs, 15_000);
  assert.equal(o.renewDeadlineMs, 10_000);
  assert.equal(o.retryPeriodMs, 2_000);
  assert.equal(o.cacheSyncTimeoutMs, 120_000);
  assert.equal(o.gracefulShutdownTimeoutMs, 30_000);
  assert.deepEqual(o.controllers, ['foo', 'network', 'deployment']);
  assert.deepEqual(o.concurrency, { foo: 1, network: 1, deployment: 1 });
  assert.equal(o.priorityQueue, true);
  assert.equal(o.maxQueueWaitMs, 30_000);
  assert.equal(o.watchList, false);
  assert.equal(o.reconcileTimeoutMs, 0, 'no reconcile timeout by default');
  assert.equal(o.logLevel, 'info');
  assert.deepEqual(o.watchNamespaces, []);
});

test('both --flag=value and --flag value forms, booleans, last one wins', () => {
  const o = parse([
    '--kubeconfig', '/k',
    '--metrics-bind-address=127.0.0.1:9090',
    '--health-probe-bind-address', '[::1]:0',
    '--metrics-secure',
    '--metrics-cert-dir=/certs',
    '--leader-elect',
    '--leader-election-namespace', 'kube-system',
    '--leader-elect-lease-duration=1m30s',
    '--leader-elect-renew-deadline', '1m',
    '--leader-elect-retry-period=500ms',
    '--graceful-shutdown-timeout=0',
    '--cache-sync-timeout', '30s',
    '--controllers', 'foo,deployment',
    '--foo-concurrency=4', '--network-concurrency', '2',
    '--priority-queue=false', '--max-queue-wait', '1m',
    '--log-level=debug', '--log-level', 'warn',
    '--neutron-cloud-config=/c.yaml', '--neutron-cloud', 'local',
  ]);
  assert.equal(o.kubeconfig, '/k');
  assert.equal(o.metricsBindAddress, '127.0.0.1:9090');
  assert.equal(o.healthProbeBindAddress, '[::1]:0');
  assert.equal(o.metricsSecure, true);
  assert.equal(o.metricsCertDir, '/certs');
  assert.equal(o.leaderElect, true);
  assert.equal(o.leaderElectionNamespace, 'kube-system');
  assert.equal(o.leaseDurationMs, 90_000);
  assert.equal(o.renewDeadlineMs, 60_000);
  assert.equal(o.retryPeriodMs, 500);
  assert.equal(o.gracefulShutdownTimeoutMs, 0);
  assert.equal(o.cacheSyncTimeoutMs, 30_000);
  assert.deepEqual(o.controllers, ['foo', 'deployment']);
  assert.deepEqual(o.concurrency, { foo: 4, network: 2, deployment: 1 });
  assert.equal(o.priorityQueue, false);
  assert.equal(o.maxQueueWaitMs, 60_000);
  assert.equal(o.logLevel, 'warn');
  assert.equal(o.neutronCloudConfig, '/c.yaml');
  assert.equal(o.neutronCloud, 'local');
});

test('--leader-elect=false and "0" addresses', () => {
  const o = parse(['--leader-elect=true', '--leader-elect=false', '--metrics-bind-address=0', '--health-probe-bind-address', '0']);
  assert.equal(o.leaderElect, false);
  assert.equal(o.metricsBindAddress, '0');
  assert.equal(o.healthProbeBindAddress, '0');
});

test('--priority-queue: a boolean like the others (bare = true; false turns the priority queue off)', () => {
  assert.equal(parse(['--priority-queue=false']).priorityQueue, false);
  assert.equal(parse(['--priority-queue=false', '--priority-queue']).priorityQueue, true);
  assert.equal(parse(['--priority-queue=0']).priorityQueue, false);
  assert.equal(parse(['--max-queue-wait=500ms']).maxQueueWaitMs, 500);
  assert.equal(parse(['--reconcile-timeout=1m30s']).reconcileTimeoutMs, 90_000);
  assert.equal(parse(['--reconcile-timeout', '0']).reconcileTimeoutMs, 0);
});

test('--watch-list: a boolean like the others (off by default; bare = true)', () => {
  assert.equal(parse(['--watch-list']).watchList, true);
  assert.equal(parse(['--watch-list=true']).watchList, true);
  assert.equal(parse(['--watch-list', '--watch-list=false']).watchList, false);
  assert.equal(parse(['--watch-list=0']).watchList, false);
  assert.match(helpText(), /--watch-list\s.*initial-events-end.*falls back to paged LIST.*\(default "false"\)/);
});

test('--help short-circuits validation', () => {
  assert.equal(parse(['--bogus=1', '-h']).help, true);
  assert.equal(parse(['--help']).help, true);
  assert.equal(parse(['--log-level=info', '--help', '--nope']).help, true);
});

test('help text lists every flag with its default and the environment', () => {
  const h = helpText();
  for (const f of [
    '--kubeconfig', '--metrics-bind-address', '--metrics-secure', '--metrics-cert-dir', '--health-probe-bind-address',
    '--leader-elect ', '--leader-election-id', '--leader-election-namespace', '--leader-elect-lease-duration',
    '--leader-elect-renew-deadline', '--leader-elect-retry-period', '--graceful-shutdown-timeout', '--controllers',
    '--foo-concurrency', '--network-concurrency', '--deployment-concurrency', '--priority-queue ', '--max-queue-wait=',
    '--log-level', '--neutron-cloud-config',
    '--neutron-cloud=', '--help', 'WATCH_NAMESPACE', 'KUBECONFIG', 'POD_NAMESPACE',
  ]) {
    assert.ok(h.includes(f), `help mentions ${f}`);
  }
  assert.match(h, /--metrics-bind-address=ADDR\s.*\(default "0"\)/);
  assert.match(h, /--metrics-secure\s.*\(default "true"\)/);
  assert.match(h, /--leader-elect-lease-duration=DURATION\s.*\(default "15s"\)/);
  assert.match(h, /--cache-sync-timeout=DURATION\s.*\(default "2m"\)/);
  assert.match(h, /--priority-queue\s.*\(default "true"\)/);
  assert.match(h, /--max-queue-wait=DURATION\s.*\(default "30s"\)/);
  assert.match(h, /--reconcile-timeout=DURATION\s.*\(default "0"\)/);
  assert.match(h, /^ +ts-controller-manager gen types --help /m, 'the gen subcommand is named');
  assert.match(h, /lease duration > renew deadline \+ retry period/, 'the timing rule and why');
});

test('environment: KUBECONFIG, WATCH_NAMESPACE, POD_NAMESPACE, neutron defaults', () => {
  const o = parse([], {
    KUBECONFIG: '/env/kc',
    WATCH_NAMESPACE: ' a , b,a,,c ',
    POD_NAMESPACE: 'system',
    NEUTRON_CLOUD_CONFIG: '/env/clouds.yaml',
    OS_CLOUD: 'local',
  });
  assert.equal(o.kubeconfig, undefined, '$KUBECONFIG is a path list for loadKubeConfig, never the single --kubeconfig file');
  assert.deepEqual(o.watchNamespaces, ['a', 'b', 'c']);
  assert.equal(o.podNamespace, 'system');
  assert.equal(o.leaderElectionNamespace, 'system');
  assert.equal(o.neutronCloudConfig, '/env/clouds.yaml');
  assert.equal(o.neutronCloud, 'local');
  assert.equal(parse(['--kubeconfig=/flag'], { KUBECONFIG: '/env' }).kubeconfig, '/flag');
  assert.equal(parse([], { KUBECONFIG: '/a:/b' }).kubeconfig, undefined);
  assert.deepEqual(parse([], { WATCH_NAMESPACE: '   ' }).watchNamespaces, []);
  assert.deepEqual(parse([], { WATCH_NAMESPACE: 'default' }).watchNamespaces, ['default']);
});

test('leader election namespace: flag, then POD_NAMESPACE, then the in-cluster file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ts-cm-options-'));
  const file = join(dir, 'namespace');
  writeFileSync(file, 'from-file\n');
  const deps = { inClusterNamespaceFile: file };
  assert.equal(parseOptions(['--leader-elect', '--leader-election-namespace=flag'], { POD_NAMESPACE: 'pod' }, deps).leaderElectionNamespace, 'flag');
  assert.equal(parseOptions(['--leader-elect'], { POD_NAMESPACE: 'pod' }, deps).leaderElectionNamespace, 'pod');
  assert.equal(parseOptions(['--leader-elect'], {}, deps).leaderElectionNamespace, 'from-file');
  // Without leader election the file is not consulted.
  assert.equal(parseOptions([], {}, deps).leaderElectionNamespace, undefined);
  assert.throws(() => parse(['--leader-elect']), (err: unknown) => {
    assert.ok(err instanceof UsageError);
    assert.match(err.message, /^--leader-elect needs a namespace/);
    assert.ok(err.message.includes(noFile.inClusterNamespaceFile));
    return true;
  });
});

test('--controllers semantics', () => {
  assert.deepEqual(resolveControllers('*'), ['foo', 'network', 'deployment']);
  assert.deepEqual(resolveControllers('*,-network'), ['foo', 'deployment']);
  assert.deepEqual(resolveControllers('foo,deployment,-network'), ['foo', 'deployment']);
  assert.deepEqual(resolveControllers('network'), ['network']);
  assert.deepEqual(resolveControllers(' deployment , foo '), ['foo', 'deployment']);
});

test('Go durations', () => {
  assert.equal(parseDuration('15s'), 15_000);
  assert.equal(parseDuration('1m30s'), 90_000);
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('1h'), 3_600_000);
  assert.equal(parseDuration('1.5s'), 1_500);
  assert.equal(parseDuration('0'), 0);
  assert.equal(parseDuration('2000us'), 2);
  for (const bad of ['', '15', 's', '1x', '-1s', '1s2', '1 s', '1.2.3s']) {
    assert.throws(() => parseDuration(bad), Error, bad);
  }
  assert.equal(formatDuration(90_000), '1m30s');
  assert.equal(formatDuration(2_400), '2.4s');
  assert.equal(formatDuration(500), '500ms');
});

test('duration flags: sync period 0 or ≥ 1s; long durations up to Go\'s range are kept exactly', () => {
  assert.equal(parse(['--sync-period=0']).syncPeriodMs, 0);
  assert.equal(parse(['--sync-period=1s']).syncPeriodMs, 1000);
  assert.equal(parse(['--sync-period=600h']).syncPeriodMs, 600 * 3_600_000);
  assert.equal(parse(['--graceful-shutdown-timeout=600h']).gracefulShutdownTimeoutMs, 600 * 3_600_000);
  assert.ok(Math.abs(parse(['--sync-period=2562047h47m16.854775807s']).syncPeriodMs - 9_223_372_036_854.775) < 1);
  assert.equal(parse(['--leader-elect-lease-duration=596523h14m7s']).leaseDurationMs, 2_147_483_647_000);
  assert.equal(parse([]).syncPeriodMs, 10 * 3_600_000);
  assert.equal(parse([]).webhookShutdownDelayMs, 5_000);
  assert.equal(parse(['--graceful-shutdown-timeout=4s']).webhookShutdownDelayMs, 1_000, 'unset: at most a quarter of the graceful shutdown');
  assert.equal(parse(['--graceful-shutdown-timeout=0']).webhookShutdownDelayMs, 0);
  assert.equal(parse(['--webhook-shutdown-delay=0']).webhookShutdownDelayMs, 0);
  assert.equal(parse(['--webhook-shutdown-delay=12s']).webhookShutdownDelayMs, 12_000);
});

test('--webhook-http2: off by default; true (or the bare flag) turns HTTP/2 on; anything else is a usage error', () => {
  assert.equal(parse([]).webhookHttp2, false);
  assert.equal(parse(['--webhook-http2=true']).webhookHttp2, true);
  assert.equal(parse(['--webhook-http2']).webhookHttp2, true);
  assert.equal(parse(['--webhook-http2=false']).webhookHttp2, false);
  assert.throws(() => parse(['--webhook-http2=maybe']), /for --webhook-http2: want true or false/);
});

test('Go durations: the range of time.Duration (int64 nanoseconds)', () => {
  assert.equal(parseDuration('2562047h'), 2562047 * 3_600_000);
  assert.throws(() => parseDuration('2562048h'), /^Error: duration "2562048h" out of range \(at most 2562047h47m16\.854775807s\)$/);
  assert.throws(() => parseDuration('9223372036855ms'), /out of range/);
  assert.throws(() => parseDuration('1' + '0'.repeat(400) + 'h'), /out of range/);
});

test('help text documents the sync-period minimum and the duration range', () => {
  const h = helpText();
  assert.match(h, /--sync-period=DURATION\s.*0 disables resync; otherwise at least 1s/);
  assert.match(h, /at most 2562047h47m16\.854775807s/);
});

test('bind addresses', () => {
  assert.deepEqual(parseBindAddress(':8080'), { host: undefined, port: 8080 });
  assert.deepEqual(parseBindAddress('0.0.0.0:1'), { host: '0.0.0.0', port: 1 });
  assert.deepEqual(parseBindAddress('[::]:9443'), { host: '::', port: 9443 });
  assert.deepEqual(parseBindAddress('localhost:0'), { host: 'localhost', port: 0 });
  assert.equal(parseBindAddress('0'), undefined);
  for (const bad of ['8080', ':', ':99999', 'host:', 'a b:1', '::1:80', 'host:port']) {
    assert.throws(() => parseBindAddress(bad), Error, bad);
  }
});

/** Each malformed invocation throws a UsageError whose one-line message matches. */
const malformed: { argv: string[]; env?: NodeJS.ProcessEnv; message: RegExp }[] = [
  { argv: ['--bogus'], message: /^unknown flag --bogus$/ },
  { argv: ['--leader-elct'], message: /^unknown flag --leader-elct \(did you mean --leader-elect\?\)$/ },
  { argv: ['-kubeconfig=/x'], message: /^unknown flag -kubeconfig \(did you mean --kubeconfig\?\)$/ },
  { argv: ['extra'], message: /^unexpected argument "extra"/ },
  { argv: ['--leader-elect', 'false'], message: /^unexpected argument "false"/ },
  { argv: ['--kubeconfig'], message: /^flag --kubeconfig needs a value/ },
  { argv: ['--kubeconfig', '--leader-elect'], message: /^flag --kubeconfig needs a value/ },
  { argv: ['--kubeconfig='], message: /^flag --kubeconfig needs a non-empty value/ },
  { argv: ['--leader-elect=maybe'], message: /^invalid value "maybe" for --leader-elect: want true or false$/ },
  { argv: ['--metrics-secure=yes'], message: /for --metrics-secure: want true or false/ },
  { argv: ['--metrics-bind-address=8080'], message: /^invalid value for --metrics-bind-address: invalid address "8080"/ },
  { argv: ['--pprof-bind-address=6060'], message: /^invalid value for --pprof-bind-address: invalid address "6060"/ },
  { argv: ['--pprof-bind-address', 'localhost:http'], message: /^invalid value for --pprof-bind-address: invalid address "localhost:http"/ },
  { argv: ['--pprof-bind-address'], message: /^flag --pprof-bind-address needs a value/ },
  { argv: ['--webhook-bind-address=9443'], message: /^invalid value for --webhook-bind-address: invalid address "9443"/ },
  { argv: ['--webhook-bind-address', 'host:https'], message: /^invalid value for --webhook-bind-address: invalid address "host:https"/ },
  { argv: ['--webhook-bind-address'], message: /^flag --webhook-bind-address needs a value/ },
  { argv: ['--webhook-cert-path='], message: /^flag --webhook-cert-path needs a non-empty value$/ },
  { argv: ['--webhook-cert-path'], message: /^flag --webhook-cert-path needs a value/ },
  { argv: ['--webhook-bind-address=0', '--webhook-cert-path=/c'], message: /^--webhook-cert-path only applies when the webhook server is on/ },
  { argv: ['--webhook-cert-pth=/c'], message: /^unknown flag --webhook-cert-pth \(did you mean --webhook-cert-path\?\)$/ },
  { argv: ['--webhook-cert-mode=auto'], message: /^invalid value "auto" for --webhook-cert-mode: want one of none\|dir\|self-managed$/ },
  { argv: ['--webhook-cert-mode=dir'], message: /^--webhook-cert-mode=dir needs --webhook-cert-path$/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-path=/c'], env: { POD_NAMESPACE: 'ns' }, message: /^--webhook-cert-path only applies with --webhook-cert-mode=dir \(got --webhook-cert-mode=self-managed\)$/ },
  { argv: ['--webhook-cert-mode=self-managed'], message: /^--webhook-cert-mode=self-managed needs the namespace of its Secret: set POD_NAMESPACE/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-bind-address=0'], env: { POD_NAMESPACE: 'ns' }, message: /^--webhook-cert-mode=self-managed needs the webhook server/ },
  { argv: ['--webhook-cert-secret=s'], message: /^--webhook-cert-secret only applies with --webhook-cert-mode=self-managed$/ },
  { argv: ['--webhook-cert-path=/c', '--webhook-cert-ips=127.0.0.1'], message: /^--webhook-cert-ips only applies with --webhook-cert-mode=self-managed$/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-ips=127.0.0.1,localhost'], env: { POD_NAMESPACE: 'ns' }, message: /^invalid value "localhost" in --webhook-cert-ips: want an IP address$/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-secret=Bad_Name'], env: { POD_NAMESPACE: 'ns' }, message: /^invalid value "Bad_Name" in --webhook-cert-secret: want a Secret name/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-service-name=a,b'], env: { POD_NAMESPACE: 'ns' }, message: /^--webhook-service-name needs exactly one a Service name/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-conversion-crds=networks'], env: { POD_NAMESPACE: 'ns' }, message: /^invalid value "networks" in --webhook-conversion-crds/ },
  { argv: ['--webhook-cert-validity=1h'], message: /^--webhook-cert-validity only applies with --webhook-cert-mode=self-managed$/ },
  { argv: ['--webhook-cert-path=/c', '--webhook-cert-poll-interval=1s'], message: /^--webhook-cert-poll-interval only applies with --webhook-cert-mode=self-managed$/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-validity=90d'], env: { POD_NAMESPACE: 'ns' }, message: /^invalid value for --webhook-cert-validity: invalid duration "90d"/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-ca-validity=0'], env: { POD_NAMESPACE: 'ns' }, message: /^invalid value for --webhook-cert-ca-validity: must be greater than 0$/ },
  { argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-poll-interval='], env: { POD_NAMESPACE: 'ns' }, message: /^invalid value for --webhook-cert-poll-interval: empty duration$/ },
  {
    argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-validity=8760h'], env: { POD_NAMESPACE: 'ns' },
    message: /^--webhook-cert-ca-validity \(8760h\) must be at least 3 × --webhook-cert-validity \(8760h\): /,
  },
  {
    argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-validity=12m'], env: { POD_NAMESPACE: 'ns' },
    message: /^--webhook-cert-propagation-delay \(2m\) \+ --webhook-cert-reload-grace \(2m\) must be less than a third of --webhook-cert-validity \(12m\)/,
  },
  {
    argv: ['--webhook-cert-mode=self-managed', '--webhook-cert-reload-grace=15s'], env: { POD_NAMESPACE: 'ns' },
    message: /^--webhook-cert-reload-grace \(15s\) must be at least 2 × --webhook-cert-poll-interval \(10s\): /,
  },
  { argv: ['--health-probe-bind-address', ':70000'], message: /--health-probe-bind-address: invalid address ":70000"/ },
  { argv: ['--leader-elect-lease-duration=15'], message: /^invalid value for --leader-elect-lease-duration: invalid duration "15"/ },
  { argv: ['--leader-elect-retry-period=2x'], message: /--leader-elect-retry-period: invalid duration "2x"/ },
  { argv: ['--graceful-shutdown-timeout=soon'], message: /--graceful-shutdown-timeout: invalid duration "soon"/ },
  { argv: ['--webhook-shutdown-delay=later'], message: /--webhook-shutdown-delay: invalid duration "later"/ },
  {
    argv: ['--webhook-shutdown-delay=15s'],
    message: /^2 × --webhook-shutdown-delay \(15s\) must be less than --graceful-shutdown-timeout \(30s\): the drain, up to twice the delay, is part of the graceful shutdown$/,
  },
  { argv: ['--leader-elect-retry-period=0'], message: /--leader-elect-retry-period: must be greater than 0/ },
  {
    argv: ['--leader-elect-lease-duration=10s'],
    message: /^--leader-elect-lease-duration \(10s\) must be greater than --leader-elect-renew-deadline \+ --leader-elect-retry-period \(10s \+ 2s\)/,
  },
  {
    // Issue 11 item 4: lease > renew alone let a leader that renewed late believe it led past the lease.
    argv: ['--leader-elect-lease-duration=1s', '--leader-elect-renew-deadline=900ms', '--leader-elect-retry-period=700ms'],
    message: /^--leader-elect-lease-duration \(1s\) must be greater than --leader-elect-renew-deadline \+ --leader-elect-retry-period \(900ms \+ 700ms\)/,
  },
  { argv: ['--leader-elect-lease-duration=12s'], message: /must be greater than --leader-elect-renew-deadline \+ --leader-elect-retry-period \(10s \+ 2s\)/ },
  { argv: ['--cache-sync-timeout=0'], message: /^invalid value for --cache-sync-timeout: must be greater than 0$/ },
  { argv: ['--cache-sync-timeout=soon'], message: /--cache-sync-timeout: invalid duration "soon"/ },
  {
    argv: ['--leader-elect-renew-deadline=2400ms', '--leader-elect-retry-period=2s'],
    message: /^--leader-elect-renew-deadline \(2.4s\) must be greater than 1.2 × --leader-elect-retry-period \(2s\)$/,
  },
  { argv: ['--sync-period=999ms'], message: /^invalid value 999ms for --sync-period: must be 0 \(no resync\) or at least 1s$/ },
  { argv: ['--sync-period=1ms'], message: /^invalid value 1ms for --sync-period: must be 0 \(no resync\) or at least 1s$/ },
  { argv: ['--sync-period=2562048h'], message: /^invalid value for --sync-period: duration "2562048h" out of range \(at most 2562047h47m16\.854775807s\)$/ },
  { argv: ['--graceful-shutdown-timeout=99999999999h'], message: /^invalid value for --graceful-shutdown-timeout: duration "99999999999h" out of range/ },
  { argv: ['--leader-elect-retry-period=3000000h'], message: /^invalid value for --leader-elect-retry-period: duration "3000000h" out of range/ },
  {
    argv: ['--leader-elect-lease-duration=600000h'],
    message: /^invalid value 600000h for --leader-elect-lease-duration: must be at most 596523h14m7s \(the Lease stores it as int32 seconds\)$/,
  },
  { argv: ['--controllers=foo,bar'], message: /^invalid value for --controllers: unknown controller "bar" \(known: foo, network, deployment, or "\*"\)$/ },
  { argv: ['--controllers=-network'], message: /--controllers: "-network" enables no controller/ },
  { argv: ['--controllers=foo,-foo'], message: /controller "foo" is both enabled and disabled/ },
  { argv: ['--controllers=foo,,network'], message: /empty entry/ },
  { argv: ['--foo-concurrency=0'], message: /^invalid value 0 for --foo-concurrency: want 1\.\.1000$/ },
  { argv: ['--network-concurrency=-1'], message: /for --network-concurrency: want a positive integer/ },
  { argv: ['--deployment-concurrency=2.5'], message: /for --deployment-concurrency: want a positive integer/ },
  { argv: ['--deployment-concurrency', 'lots'], message: /"lots" for --deployment-concurrency/ },
  { argv: ['--priority-queue=off'], message: /^invalid value "off" for --priority-queue: want true or false$/ },
  { argv: ['--priority-queue', 'false'], message: /^unexpected argument "false"/ },
  { argv: ['--watch-list=yes'], message: /^invalid value "yes" for --watch-list: want true or false$/ },
  { argv: ['--watch-list='], message: /^invalid value "" for --watch-list: want true or false$/ },
  { argv: ['--watch-list', 'true'], message: /^unexpected argument "true"/ },
  { argv: ['--watchlist'], message: /^unknown flag --watchlist \(did you mean --watch-list\?\)$/ },
  { argv: ['--max-queue-wait=0'], message: /^invalid value for --max-queue-wait: must be greater than 0$/ },
  { argv: ['--max-queue-wait=30'], message: /^invalid value for --max-queue-wait: invalid duration "30"/ },
  { argv: ['--reconcile-timeout=30'], message: /^invalid value for --reconcile-timeout: invalid duration "30"/ },
  { argv: ['--reconcile-timeout=-1s'], message: /^invalid value for --reconcile-timeout: / },
  { argv: ['--log-level=verbose'], message: /^invalid value "verbose" for --log-level: want one of trace\|debug\|info\|warn\|error$/ },
  { argv: ['--metrics-secure=false', '--metrics-cert-dir=/c'], message: /^--metrics-cert-dir only applies with --metrics-secure$/ },
  { argv: ['--leader-election-id=Bad_Name'], message: /--leader-election-id: not a DNS-1123 subdomain/ },
  { argv: ['--leader-elect', '--leader-election-namespace=NS'], message: /invalid leader election namespace "NS"/ },
  { argv: [], env: { WATCH_NAMESPACE: 'good,Bad' }, message: /^WATCH_NAMESPACE: "Bad" is not a valid namespace name/ },
  { argv: [], env: { WATCH_NAMESPACE: 'a'.repeat(64) }, message: /^WATCH_NAMESPACE: "a{64}" is not a valid/ },
  { argv: ['--leader-elect'], message: /^--leader-elect needs a namespace for the Lease/ },
];

for (const { argv, env, message } of malformed) {
  test(`malformed: ${JSON.stringify(argv)} ${env ? JSON.stringify(env) : ''}`, () => {
    assert.throws(() => parse(argv, env), (err: unknown) => {
      assert.ok(err instanceof UsageError, `UsageError, got ${String(err)}`);
      assert.match(err.message, message);
      assert.ok(!err.message.includes('\n'), 'one line');
      return true;
    });
  });
}

test('--metrics-secure=false with an address serves plain metrics; --metrics-cert-dir needs no --metrics-secure now', () => {
  const plain = parse(['--metrics-bind-address=127.0.0.1:8080', '--metrics-secure=false']);
  assert.equal(plain.metricsBindAddress, '127.0.0.1:8080');
  assert.equal(plain.metricsSecure, false);
  const certs = parse(['--metrics-bind-address=:8443', '--metrics-cert-dir=/certs']);
  assert.equal(certs.metricsSecure, true);
  assert.equal(certs.metricsCertDir, '/certs');
});

test('--sharding: off by default, a boolean, and only with --leader-elect (the sharder holds the leader Lease)', () => {
  assert.equal(parse([]).sharding, false);
  assert.equal(parse(['--leader-elect', '--leader-election-namespace=x', '--sharding']).sharding, true);
  assert.equal(parse(['--leader-elect', '--leader-election-namespace=x', '--sharding=false']).sharding, false);
  assert.throws(() => parse(['--sharding']), (err: unknown) => {
    assert.ok(err instanceof UsageError);
    assert.equal(err.message, '--sharding needs --leader-elect (the sharder is the holder of the leader Lease)');
    return true;
  });
  assert.throws(() => parse(['--leader-elect', '--leader-election-namespace=x', '--sharding=maybe']), UsageError);
});

test('--webhook-bind-address and --webhook-cert-path: an address or "0" for off; a directory', () => {
  const o = parse(['--webhook-bind-address=127.0.0.1:10250', '--webhook-cert-path', '/certs']);
  assert.equal(o.webhookBindAddress, '127.0.0.1:10250');
  assert.equal(o.webhookCertPath, '/certs');
  assert.equal(parse(['--webhook-bind-address=0']).webhookBindAddress, '0');
  assert.equal(parse(['--webhook-bind-address', ':9444']).webhookBindAddress, ':9444');
  assert.match(helpText(), /--webhook-bind-address=ADDR\s.*"0" disables webhooks\. \(default ":9443"\)/);
  assert.match(helpText(), /--webhook-cert-path=STRING\s.*tls\.crt and tls\.key/);
});

test('webhook certificate modes: none by default (no webhooks), dir with --webhook-cert-path, self-managed with config/default\'s names', () => {
  const none = parse([]);
  assert.equal(none.webhookCertMode, 'none');
  assert.equal(none.webhookSelfManaged, undefined);
  const dir = parse(['--webhook-cert-path=/certs']);
  assert.equal(dir.webhookCertMode, 'dir');
  assert.equal(parse(['--webhook-cert-mode=dir', '--webhook-cert-path=/certs']).webhookCertMode, 'dir');
  assert.equal(parse(['--webhook-cert-mode=none']).webhookCertMode, 'none');
  const sm = parse(['--webhook-cert-mode=self-managed'], { POD_NAMESPACE: 'tscm-system' });
  assert.equal(sm.webhookCertMode, 'self-managed');
  assert.deepEqual(sm.webhookSelfManaged, {
    secretName: 'ts-controller-manager-webhook-server-cert', namespace: 'tscm-system', serviceName: 'ts-controller-manager-webhook-service',
    ips: [], validatingWebhookConfigurations: ['ts-controller-manager-validating-webhook-configuration'], mutatingWebhookConfigurations: [],
    crds: ['networks.samplecrd.k8s.io'],
    // The rotation timing defaults are pkg/webhook/certs's own (CA 1 year, serving 90 days, 2 min delays) and its 10 s poll.
    servingValidityMs: defaultRotationOptions.servingValidityMs, caValidityMs: defaultRotationOptions.caValidityMs,
    propagationMs: defaultRotationOptions.propagationMs, reloadGraceMs: defaultRotationOptions.reloadGraceMs, pollIntervalMs: 10_000,
  });
  const custom = parse([
    '--webhook-cert-mode', 'self-managed', '--webhook-cert-secret=s', '--webhook-service-name=svc', '--webhook-cert-ips=127.0.0.1, ::1',
    '--webhook-validating-configurations=', '--webhook-mutating-configurations=m1,m2', '--webhook-conversion-crds=a.example.com,a.example.com',
  ], { POD_NAMESPACE: 'ns' });
  assert.deepEqual(custom.webhookSelfManaged, {
    secretName: 's', namespace: 'ns', serviceName: 'svc', ips: ['127.0.0.1', '::1'], validatingWebhookConfigurations: [],
    mutatingWebhookConfigurations: ['m1', 'm2'], crds: ['a.example.com'],
    servingValidityMs: 90 * 86_400_000, caValidityMs: 365 * 86_400_000, propagationMs: 120_000, reloadGraceMs: 120_000, pollIntervalMs: 10_000,
  });
  // Short lifetimes (the real-node rotation proof, test/node.e2e.ts): every timing flag taken, the constraints met.
  const short = parse(['--webhook-cert-mode=self-managed', '--webhook-cert-validity=15s', '--webhook-cert-ca-validity=45s',
    '--webhook-cert-propagation-delay=2s', '--webhook-cert-reload-grace=2s', '--webhook-cert-poll-interval=500ms'], { POD_NAMESPACE: 'ns' });
  assert.deepEqual([short.webhookSelfManaged?.servingValidityMs, short.webhookSelfManaged?.caValidityMs, short.webhookSelfManaged?.propagationMs,
    short.webhookSelfManaged?.reloadGraceMs, short.webhookSelfManaged?.pollIntervalMs], [15_000, 45_000, 2_000, 2_000, 500]);
  assert.match(helpText(), /--webhook-cert-validity=DURATION\s.*\(default "2160h"\)/);
  assert.match(helpText(), /--webhook-cert-ca-validity=DURATION\s.*\(default "8760h"\)/);
  // In a pod without POD_NAMESPACE: the ServiceAccount's namespace file.
  const dirWithNs = mkdtempSync(join(tmpdir(), 'tscm-ns-'));
  writeFileSync(join(dirWithNs, 'namespace'), 'from-file\n');
  assert.equal(parseOptions(['--webhook-cert-mode=self-managed'], {}, { inClusterNamespaceFile: join(dirWithNs, 'namespace') }).webhookSelfManaged?.namespace, 'from-file');
});

test('--pprof-bind-address: an address, or "0"/"" for off', () => {
  assert.equal(parse(['--pprof-bind-address=127.0.0.1:6060']).pprofBindAddress, '127.0.0.1:6060');
  assert.equal(parse(['--pprof-bind-address', ':6060']).pprofBindAddress, ':6060');
  assert.equal(parse(['--pprof-bind-address=0']).pprofBindAddress, '0');
  assert.equal(parse(['--pprof-bind-address=']).pprofBindAddress, '0');
  assert.match(helpText(), /--pprof-bind-address=ADDR\s.*\(default "0"\)/);
});

test('webhook server limits: defaults are the library\'s; byte sizes take Ki/Mi/Gi; malformed or inconsistent values are one-line usage errors', () => {
  const d = parse([]);
  assert.equal(d.webhookMaxRequestBodyBytes, defaultMaxRequestBytes);
  assert.equal(d.webhookConversionMaxRequestBodyBytes, defaultMaxRequestBytes);
  assert.equal(d.webhookMaxInflightBodyBytes, defaultMaxInFlightBytes);
  assert.equal(d.webhookMaxRequestsInflight, defaultMaxRequestsInFlight);
  assert.equal(d.webhookMaxConnections, defaultMaxConnections);
  assert.equal(d.webhookRequestTimeoutMs, defaultRequestTimeoutMs);
  const o = parse(['--webhook-max-request-body-bytes=3Mi', '--webhook-conversion-max-request-body-bytes=64Mi', '--webhook-max-inflight-body-bytes=1Gi',
    '--webhook-max-requests-inflight=8', '--webhook-max-connections=100000', '--webhook-request-timeout=2s']);
  assert.equal(o.webhookMaxRequestBodyBytes, 3 * 1024 * 1024);
  assert.equal(o.webhookConversionMaxRequestBodyBytes, 64 * 1024 * 1024);
  assert.equal(o.webhookMaxInflightBodyBytes, 1024 * 1024 * 1024);
  assert.equal(o.webhookMaxRequestsInflight, 8);
  assert.equal(o.webhookMaxConnections, 100_000);
  assert.equal(o.webhookRequestTimeoutMs, 2_000);
  assert.equal(parse(['--webhook-max-request-body-bytes=4096', '--webhook-max-inflight-body-bytes=20000Ki']).webhookMaxRequestBodyBytes, 4096);
  for (const [args, message] of [
    [['--webhook-max-request-body-bytes=7MB'], /^invalid value "7MB" for --webhook-max-request-body-bytes: want a number of bytes, optionally with Ki, Mi or Gi \(e\.g\. 7Mi\)$/],
    [['--webhook-max-request-body-bytes=0'], /^invalid value "0" for --webhook-max-request-body-bytes: want at least 1 byte$/],
    [['--webhook-max-inflight-body-bytes=8Mi', '--webhook-conversion-max-request-body-bytes=16Mi'], /^--webhook-max-inflight-body-bytes \(8Mi\) must be at least --webhook-conversion-max-request-body-bytes \(16Mi\): a body at its limit must fit$/],
    [['--webhook-max-inflight-body-bytes=6Mi'], /^--webhook-max-inflight-body-bytes \(6Mi\) must be at least --webhook-max-request-body-bytes \(7Mi\): a body at its limit must fit$/],
    [['--webhook-max-request-body-bytes=40Mi'], /^--webhook-max-inflight-body-bytes \(16Mi\) must be at least --webhook-max-request-body-bytes \(40Mi\): a body at its limit must fit$/],
    [['--webhook-max-requests-inflight=0'], /^invalid value 0 for --webhook-max-requests-inflight: want 1\.\.100000$/],
    [['--webhook-max-connections=-1'], /^invalid value "-1" for --webhook-max-connections: want a positive integer$/],
    [['--webhook-request-timeout=0'], /^invalid value for --webhook-request-timeout: must be greater than 0$/],
  ] as const) {
    assert.throws(() => parse([...args]), (err: Error) => err instanceof UsageError && message.test(err.message) && !err.message.includes('\n'), args.join(' '));
  }
  const help = helpText();
  for (const flag of ['webhook-max-request-body-bytes', 'webhook-conversion-max-request-body-bytes', 'webhook-max-inflight-body-bytes', 'webhook-max-requests-inflight', 'webhook-max-connections', 'webhook-request-timeout']) {
    assert.match(help, new RegExp(`--${flag}=`), flag);
  }
});

test('webhookServerLimits: each flag reaches its WebhookServer option (/convert\'s limit by path)', () => {
  assert.deepEqual(webhookServerLimits(parse(['--webhook-max-request-body-bytes=1Mi', '--webhook-conversion-max-request-body-bytes=2Mi',
    '--webhook-max-inflight-body-bytes=3Mi', '--webhook-max-requests-inflight=4', '--webhook-max-connections=5', '--webhook-request-timeout=6s'])), {
    maxRequestBytes: 1024 * 1024, maxRequestBytesByPath: { '/convert': 2 * 1024 * 1024 }, maxInFlightBytes: 3 * 1024 * 1024,
    maxRequestsInFlight: 4, maxConnections: 5, requestTimeoutMs: 6_000,
  });
});
