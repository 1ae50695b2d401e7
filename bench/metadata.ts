/**
 * Metadata-only informers (issue 30, `InformerForOptions.metadataOnly`): what a cache of PartialObjectMetadata
 * saves against a full cache of the same objects, on a real API server.
 *
 * One private minimal control plane with N ConfigMaps (`--data-bytes` of data each, default 2 KiB: a typical
 * ConfigMap or Secret) in one namespace. Per run, a FRESH child process (`--expose-gc`) warms its connection with a
 * LIST of an empty namespace, settles (full GCs), then starts ONE informer over the namespace — `full` (the default
 * transform: managedFields dropped) or `metadata` (`metadataOnly: true`) — until synced, settles again and reports:
 * start → synced (wall), its own CPU (process.cpuUsage) over the sync, and the retained JS heap and RSS over its
 * baseline. The parent reads kube-apiserver's CPU (/proc) around each child: serving metadata is cheaper for the
 * server too. Variants alternate ABBA, `--rounds` each; the table gives median (min–max) and metadata ÷ full.
 *
 *   node bench/metadata.ts [--objects 10000] [--data-bytes 2048] [--rounds 3]
 */
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Registry } from 'prom-client';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { collectionPath } from '../pkg/apimachinery/paths.ts';
import { freshFooControlPlane, log, runAll, RAW_CLIENTS, stopEnv } from './common.ts';
import { median, MiB, procCpuMs, settle } from './informer/stats.ts';
import { BenchResults, ratio, spread } from './results.ts';

const { values: args } = parseArgs({
  options: {
    objects: { type: 'string', default: '10000' },
    'data-bytes': { type: 'string', default: '2048' },
    rounds: { type: 'string', default: '3' },
    child: { type: 'string' },
    kubeconfig: { type: 'string' },
  },
});

type Variant = 'full' | 'metadata';
interface ChildResult { objects: number; syncMs: number; cpuMs: number; heapMiB: number; rssMiB: number; dataCached: boolean }

const namespace = 'bench-meta';
const emptyNamespace = 'bench-meta-empty';


/** The child: one informer of one variant, measured from a settled, connected baseline. */
async function child(variant: Variant, kubeconfig: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry() });
  await rest.json('GET', collectionPath(coreResources.configMaps, emptyNamespace), { query: { limit: 1 } });
  const before = await settle();
  const factory = new SharedInformerFactory({ client: rest, namespaces: [namespace] });
  const inf = factory.informerFor(coreResources.configMaps, variant === 'metadata' ? { metadataOnly: true } : {});
  const ac = new AbortController();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const running = factory.run(ac.signal);
  if (!(await factory.waitForCacheSync({ timeoutMs: 300_000 }))) throw new Error('informer did not sync');
  const syncMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const after = await settle();
  const objects = inf.lister().list();
  const result: ChildResult = {
    objects: objects.length, syncMs, cpuMs: (cpu.user + cpu.system) / 1000,
    heapMiB: (after.heapUsed - before.heapUsed) / MiB, rssMiB: (after.rss - before.rss) / MiB,
    dataCached: objects.some((o) => 'data' in o),
  };
  ac.abort();
  await running;
  await rest.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

async function main(): Promise<void> {
  const n = Number(args.objects);
  const dataBytes = Number(args['data-bytes']);
  const rounds = Number(args.rounds);
  const results = new BenchResults('metadata', {
    name: 'full informer',
    description: 'the same informer without metadataOnly (default transform: managedFields dropped), a fresh process per run, ABBA in the same run',
  });
  const env = await freshFooControlPlane(0, { namespaceCount: 0, prefix: 'tscm-meta-' });
  try {
    for (const ns of [namespace, emptyNamespace]) await env.rest.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
    const ms = await runAll(n, RAW_CLIENTS, (i) => env.rest.json('POST', collectionPath(coreResources.configMaps, namespace), {
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, labels: { app: 'bench', shard: String(i % 10) } }, data: { payload: 'x'.repeat(dataBytes) } },
    }));
    log(`${n} ConfigMaps of ${dataBytes} data bytes created in ${(ms / 1000).toFixed(1)} s`);
    const apiPid = env.cp.state.components['kube-apiserver']?.pid ?? 0;
    const runs: (ChildResult & { variant: Variant; apiCpuMs: number })[] = [];
    const loads: number[] = [];
    for (let r = 0; r < rounds; r++) {
      for (const variant of (r % 2 === 0 ? ['full', 'metadata'] : ['metadata', 'full']) as Variant[]) {
        loads.push(loadavg()[0] ?? 0);
        results.sampleLoad();
        const api0 = procCpuMs(apiPid);
        const out = spawnSync(process.execPath, ['--expose-gc', process.argv[1] ?? '', '--child', variant, '--kubeconfig', env.cp.kubeconfig], { encoding: 'utf8' });
        const apiCpuMs = procCpuMs(apiPid) - api0;
        if (out.status !== 0) throw new Error(`child ${variant} failed: ${out.stderr}`);
        const res = JSON.parse(out.stdout.trim().split('\n').at(-1) ?? '') as ChildResult;
        if (res.objects !== n) throw new Error(`child ${variant} cached ${res.objects} of ${n}`);
        if (res.dataCached !== (variant === 'full')) throw new Error(`child ${variant}: data cached = ${res.dataCached}`);
        runs.push({ ...res, variant, apiCpuMs });
        log(`round ${r + 1}/${rounds} ${variant}: synced in ${res.syncMs.toFixed(0)} ms, CPU ${res.cpuMs.toFixed(0)} ms, kube-apiserver ${apiCpuMs.toFixed(0)} ms, heap +${res.heapMiB.toFixed(1)} MiB, RSS +${res.rssMiB.toFixed(1)} MiB`);
      }
    }
    const of = (v: Variant, f: (x: (typeof runs)[number]) => number): number[] => runs.filter((x) => x.variant === v).map(f);
    const cell = (xs: number[], d: number): string => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;
    const rows: [string, (x: (typeof runs)[number]) => number, number][] = [
      ['start → synced ms', (x) => x.syncMs, 0], ['informer CPU ms', (x) => x.cpuMs, 0], ['kube-apiserver CPU ms', (x) => x.apiCpuMs, 0],
      ['retained JS heap MiB', (x) => x.heapMiB, 1], ['RSS over baseline MiB', (x) => x.rssMiB, 1],
    ];
    const lines = ['| measure | full (managedFields dropped) | metadataOnly | metadata ÷ full |', '|---|---:|---:|---:|'];
    const keys = ['sync', 'cpu', 'apiserverCpu', 'heap', 'rss'];
    const units = ['ms', 'CPU-ms', 'CPU-ms', 'MiB', 'MiB'];
    results.set('objects', { value: n, unit: 'count' });
    results.set('dataBytes', { value: dataBytes, unit: 'B' });
    rows.forEach(([, f], i) => {
      const key = keys[i] ?? `m${i}`;
      results.set(`${key}.full`, spread(of('full', f), units[i] ?? ''));
      results.set(`${key}.metadata`, spread(of('metadata', f), units[i] ?? ''));
      results.set(`${key}.ratio`, ratio(median(of('metadata', f)), median(of('full', f))));
    });
    results.runs = runs;
    results.write();
    for (const [name, f, d] of rows) lines.push(`| ${name} | ${cell(of('full', f), d)} | ${cell(of('metadata', f), d)} | ${(median(of('metadata', f)) / median(of('full', f))).toFixed(2)} |`);
    process.stdout.write(`\n${lines.join('\n')}\n\n(${n} ConfigMaps with ${dataBytes} bytes of data each, one namespace, ${rounds} rounds ABBA, fresh process per run, ` +
      `median (min–max); Node ${process.version}, 1-min load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)})\n`);
  } finally {
    await stopEnv(env);
  }
}

if (args.child) await child(args.child as Variant, args.kubeconfig ?? '');
else await main();
