/**
 * CPU per request of the HTTP client (issue 30): `RestClient.json` of two source trees, in ABBA order, against one
 * loopback HTTP/2 stand-in for the API server — so a change of the client's per-request path (pkg/client) can be
 * resolved below the ±10 % that `bench/ab.ts` (a whole converge on a shared machine) resolves.
 *
 *   node bench/client-cpu.ts --a /tmp/base --b . [--requests 5000] [--rounds 6] [--b-option decode=false]
 *
 * `--a` / `--b` are source trees (their `pkg/client/rest.ts` is imported as TypeScript; `node_modules` in or above
 * them). The server (a child process, `--serve`: TLS, ALPN h2, answers every request 201 with a fixed 1.5 KiB
 * Event-shaped JSON after reading its body) runs for the whole bench. Each measured run is a FRESH client process
 * (`--client`): one RestClient with a token, 2 000 warm-up requests, then `--requests` merge PATCHes with a small
 * body, 8 in flight (the Foo controller's workers), timed by `process.cpuUsage()` of that process (user + system:
 * the client's own CPU, the server's is elsewhere). `--a-option` / `--b-option k=v` add a RequestOptions field to
 * every request of that side (e.g. `decode=false`). Prints median (min–max) µs of CPU per request per side and B ÷ A.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type * as PromClient from 'prom-client';
import type * as Kubeconfig from '../pkg/client/kubeconfig.ts';
import type * as Rest from '../pkg/client/rest.ts';
import { BenchResults, ratio, spread } from './results.ts';

const { values: args } = parseArgs({
  options: {
    a: { type: 'string' }, b: { type: 'string' },
    requests: { type: 'string', default: '5000' }, rounds: { type: 'string', default: '6' },
    'a-option': { type: 'string' }, 'b-option': { type: 'string' },
    serve: { type: 'string' }, client: { type: 'string' }, info: { type: 'string' }, option: { type: 'string' },
  },
});

/** An Event as the API server answers a POST (with its managedFields): what a write's answer costs to decode. */
const answer = JSON.stringify({
  kind: 'Event', apiVersion: 'v1',
  metadata: {
    name: 'foo.1871', namespace: 'ns', uid: '0b5e0e9c-7f1a-4c59-9d33-4ad4b7e1c0a1', resourceVersion: '123456', creationTimestamp: '2026-11-26T17:00:00Z',
    managedFields: [{ manager: 'x', operation: 'Update', apiVersion: 'v1', time: '2026-11-26T17:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:count': {}, 'f:firstTimestamp': {}, 'f:involvedObject': {}, 'f:lastTimestamp': {}, 'f:message': {}, 'f:reason': {}, 'f:source': { 'f:component': {} }, 'f:type': {} } }],
  },
  involvedObject: { kind: 'Foo', namespace: 'ns', name: 'foo', uid: '1b5e0e9c-7f1a-4c59-9d33-4ad4b7e1c0a1', apiVersion: 'samplecontroller.k8s.io/v1alpha1', resourceVersion: '123' },
  reason: 'Synced', message: 'Foo synced successfully', source: { component: 'foo-controller' },
  firstTimestamp: '2026-11-26T17:00:00Z', lastTimestamp: '2026-11-26T17:00:00Z', count: 1, type: 'Normal',
});

async function serve(infoFile: string): Promise<void> {
  const { createSecureServer } = await import('node:http2');
  const { selfSignedCertificate } = await import('../pkg/manager/selfsigned.ts');
  const cert = await selfSignedCertificate({ commonName: 'bench', ips: ['127.0.0.1'] });
  const s = createSecureServer({ cert: cert.cert, key: cert.key });
  s.on('request', (req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(201, { 'content-type': 'application/json' }).end(answer));
  });
  s.listen(0, '127.0.0.1', () => writeFileSync(infoFile, JSON.stringify({ port: (s.address() as { port: number }).port, ca: cert.cert.toString() })));
}

async function client(tree: string, infoFile: string, n: number, option: string | undefined): Promise<void> {
  const { RestClient } = (await import(join(tree, 'pkg/client/rest.ts'))) as typeof Rest;
  const { KubeConfig } = (await import(join(tree, 'pkg/client/kubeconfig.ts'))) as typeof Kubeconfig;
  const { Registry } = createRequire(join(tree, 'package.json'))('prom-client') as typeof PromClient;
  const { port, ca } = JSON.parse(readFileSync(infoFile, 'utf8')) as { port: number; ca: string };
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${port}`, caData: Buffer.from(ca).toString('base64') }],
    users: [{ name: 'u', token: 'bench' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const c = new RestClient({ kubeConfig: kc, registry: new Registry() });
  const extra: Record<string, unknown> = {};
  if (option) {
    const [k, v] = option.split('=');
    extra[k ?? ''] = v === 'false' ? false : v === 'true' ? true : v;
  }
  const body = { metadata: { uid: 'u', resourceVersion: '1' }, status: { availableReplicas: 1 } };
  const run = async (count: number): Promise<void> => {
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next++ < count) {
        await c.json('PATCH', '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/x/status', { body, contentType: 'application/merge-patch+json', ...extra });
      }
    }));
  };
  // Holds the loop for trees before 74175da (concurrent first writes on a connecting session did not ref it).
  const keep = setInterval(() => {}, 1000);
  await run(2000);
  const t = process.cpuUsage();
  await run(n);
  const u = process.cpuUsage(t);
  clearInterval(keep);
  await c.close();
  process.stdout.write(`${(u.user + u.system) / n}\n`);
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

async function main(): Promise<void> {
  const res = new BenchResults('client-cpu', {
    name: `A: ${args.a ?? '?'}`,
    description: 'client tree A (the baseline) interleaved ABBA with tree B against the same local server in the same run',
  });
  if (!args.a || !args.b) throw new Error('usage: node bench/client-cpu.ts --a TREE_A --b TREE_B [--requests N] [--rounds R] [--b-option k=v]');
  const trees = { A: resolve(args.a), B: resolve(args.b) };
  const options = { A: args['a-option'], B: args['b-option'] };
  const dir = mkdtempSync(join(tmpdir(), 'client-cpu-'));
  const info = join(dir, 'server.json');
  const node = process.execPath;
  const server = spawn(node, [import.meta.filename, '--serve', info], { stdio: 'inherit' });
  try {
    for (let i = 0; ; i++) {
      try {
        readFileSync(info);
        break;
      } catch {
        if (i > 300) throw new Error('bench server did not start');
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const out: Record<'A' | 'B', number[]> = { A: [], B: [] };
    const loads: number[] = [];
    for (let r = 0; r < Number(args.rounds); r++) {
      for (const side of r % 2 === 0 ? (['A', 'B'] as const) : (['B', 'A'] as const)) {
        loads.push(loadavg()[0] ?? 0);
        const us = Number(execFileSync(node, [import.meta.filename, '--client', trees[side], '--info', info, '--requests', args.requests, ...(options[side] ? ['--option', options[side]] : [])], { encoding: 'utf8' }).trim());
        out[side].push(us);
        res.sampleLoad();
        process.stderr.write(`round ${r + 1} ${side}: ${us.toFixed(1)} µs CPU per request\n`);
      }
    }
    for (const s of ['A', 'B'] as const) res.set(s, { tree: `${trees[s]}${options[s] ? ` (${options[s]})` : ''}`, cpuPerRequest: spread(out[s], 'CPU-µs') });
    res.set('ratio', ratio(median(out.B), median(out.A)));
    res.write();
    const row = (s: 'A' | 'B'): string => `| ${s}: ${trees[s]}${options[s] ? ` (${options[s]})` : ''} | ${median(out[s]).toFixed(1)} (${Math.min(...out[s]).toFixed(1)}–${Math.max(...out[s]).toFixed(1)}) |`;
    process.stdout.write(`\n| client | CPU µs per request |\n|---|---:|\n${row('A')}\n${row('B')}\n| B ÷ A (medians) | ${(median(out.B) / median(out.A)).toFixed(2)} |\n\n` +
      `(${args.requests} requests per run after 2 000 warm-up, 8 in flight, ${args.rounds} rounds ABBA, fresh client process per run; Node ${process.version}, ${cpus().length} CPUs, load ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)})\n`);
  } finally {
    server.kill();
  }
}

if (args.serve) await serve(args.serve);
else if (args.client) await client(args.client, args.info ?? '', Number(args.requests), args.option);
else await main();
