/**
 * Fixed cost per module (issue 30): what each top-level dependency and each room of the library costs to import.
 * Every case is a FRESH `node --expose-gc` process that imports the case's modules (compiled dist/, as the image runs
 * them) and reports, relative to a bare node in the same run:
 *
 *  - import wall time and CPU time (`performance.now()` / `process.cpuUsage()` around the imports),
 *  - RSS right after the imports (what the process holds: code, heap, native),
 *  - RSS and JS heap used after two full GCs (what the modules retain; RSS right after loading also holds the
 *    young generation that loading filled, which V8 keeps); "of which anonymous" is RSS less file-backed pages (mostly
 *    the node binary's own code and embedded built-in sources, faulted in by first use: clean, shared, reclaimable).
 *
 * Median of `--runs` (default 5) per case; the order of the cases alternates forward/backward every round (ABBA) so
 * a machine getting busier or quieter does not favour the cases at one end.
 *
 *   node bench/imports.ts [--runs 5] [--no-build]
 *
 * Builds dist/ first (tsc -p tsconfig.build.json) unless --no-build. Prints one markdown table on stdout.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { log } from './common.ts';
import { BenchResults, spread, val } from './results.ts';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '5' }, 'no-build': { type: 'boolean', default: false } } });
const runs = Number(args.runs);
const repo = join(import.meta.dirname, '..');
const dist = join(repo, 'dist');

interface Case { name: string; modules: string[] }

const distFile = (rel: string): string => pathToFileURL(join(dist, rel)).href;
/** Every compiled non-test module of one folder of pkg/ (a "room" of the library). */
function room(dir: string): string[] {
  return readdirSync(join(dist, 'pkg', dir))
    .filter((f) => f.endsWith('.js') && !f.endsWith('.test.js') && !f.startsWith('fake'))
    .map((f) => distFile(join('pkg', dir, f)));
}

function cases(): Case[] {
  const deps = ['prom-client', 'pino', 'undici', '@kubernetes/client-node', 'js-yaml', 'lru-cache', 'reflect-metadata'];
  const rooms = ['util', 'log', 'metrics', 'apis', 'client', 'workqueue', 'informerfactory', 'controller', 'events', 'manager', 'sharding', 'runtime', 'neutron', 'controllers'];
  return [
    { name: 'bare node', modules: [] },
    // Node built-ins the manager needs anyway (probe/metrics servers, the API connection): part of every row below.
    ...['node:http', 'node:https', 'node:http2', 'node:tls'].map((b) => ({ name: b, modules: [b] })),
    ...deps.map((d) => ({ name: d, modules: [d] })),
    // @peculiar/x509 (tsyringe) needs the Reflect polyfill loaded first, as pkg/manager/selfsigned.ts does.
    { name: '@peculiar/x509 (+reflect-metadata)', modules: ['reflect-metadata', '@peculiar/x509'] },
    ...rooms.map((r) => ({ name: `pkg/${r}/*`, modules: room(r) })),
    // The library's own code = the next row minus this one.
    { name: 'its npm dependencies only (prom-client, pino, js-yaml, lru-cache)', modules: ['prom-client', 'pino', 'js-yaml', 'lru-cache'] },
    { name: 'pkg/index.js (the whole library)', modules: [distFile('pkg/index.js')] },
    {
      // What cmd/manager/cli.ts loads before it connects: flags, kubeconfig loader, the wiring with every controller.
      name: 'manager main, up to connecting',
      modules: [distFile('cmd/manager/options.js'), distFile('pkg/manager/kubeconfig.js'), distFile('cmd/manager/run.js')],
    },
  ];
}

interface Sample { wallMs: number; cpuMs: number; rss: number; rssGc: number; anon: number; heap: number; startMs: number }

/** The child: imports, measures, collects garbage twice, prints one JSON line. */
const childCode = `
const mods = JSON.parse(process.env.IMPORTS);
const c0 = process.cpuUsage(); const t0 = performance.now();
for (const m of mods) await import(m);
const wallMs = performance.now() - t0; const c = process.cpuUsage(c0);
const rss = process.memoryUsage().rss;
globalThis.gc(); globalThis.gc();
const after = process.memoryUsage();
const { readFileSync } = await import('node:fs');
const anon = Number(/^Anonymous:\\s+(\\d+) kB/m.exec(readFileSync('/proc/self/smaps_rollup', 'utf8'))?.[1] ?? 0) * 1024;
process.stdout.write(JSON.stringify({ wallMs, cpuMs: (c.user + c.system) / 1000, rss, rssGc: after.rss, anon, heap: after.heapUsed, startMs: performance.now() }) + '\\n');
`;

function measure(c: Case): Sample {
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', childCode], {
    cwd: repo, env: { PATH: process.env['PATH'], IMPORTS: JSON.stringify(c.modules) }, encoding: 'utf8',
  });
  return JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as Sample;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

function main(): void {
  if (!args['no-build']) {
    log('building dist/ (tsc -p tsconfig.build.json)');
    execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
  }
  const res = new BenchResults('imports', {
    name: 'bare node',
    description: 'a fresh node process importing nothing, in the same ABBA rounds: every Δ is against it',
  });
  const all = cases();
  const samples = new Map<string, Sample[]>(all.map((c) => [c.name, []]));
  for (let r = 0; r < runs; r++) {
    const order = r % 2 === 0 ? all : [...all].reverse();
    log(`round ${r + 1}/${runs}`);
    for (const c of order) samples.get(c.name)?.push(measure(c));
    res.sampleLoad();
  }
  const med = (name: string, k: keyof Sample): number => median((samples.get(name) ?? []).map((s) => s[k]));
  const MiB = 1024 * 1024;
  const bareRss = med('bare node', 'rss');
  const bareHeap = med('bare node', 'heap');
  const bareRssGc = med('bare node', 'rssGc');
  const bareAnon = med('bare node', 'anon');
  const lines = [
    '| imported | import wall ms | import CPU ms | RSS MiB | Δ RSS MiB | Δ RSS after GC MiB | of which anonymous MiB | heap after GC MiB | Δ heap MiB |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const c of all) {
    const rss = med(c.name, 'rss');
    const heap = med(c.name, 'heap');
    lines.push(`| ${c.name} | ${med(c.name, 'wallMs').toFixed(0)} | ${med(c.name, 'cpuMs').toFixed(0)} | ${(rss / MiB).toFixed(1)} | ` +
      `${c.name === 'bare node' ? '–' : ((rss - bareRss) / MiB).toFixed(1)} | ${c.name === 'bare node' ? '–' : ((med(c.name, 'rssGc') - bareRssGc) / MiB).toFixed(1)} | ${c.name === 'bare node' ? '–' : ((med(c.name, 'anon') - bareAnon) / MiB).toFixed(1)} | ${(heap / MiB).toFixed(1)} | ${c.name === 'bare node' ? '–' : ((heap - bareHeap) / MiB).toFixed(1)} |`);
  }
  for (const c of all) {
    const xs = samples.get(c.name) ?? [];
    res.set(`imports.${c.name.replace(/[^\w-]+/g, '_')}`, {
      name: c.name, importCpu: spread(xs.map((x) => x.cpuMs), 'CPU-ms'), rss: spread(xs.map((x) => x.rss / MiB), 'MiB'),
      heap: spread(xs.map((x) => x.heap / MiB), 'MiB'),
      ...(c.name === 'bare node' ? {} : { rssDelta: val((med(c.name, 'rss') - bareRss) / MiB, 'MiB'), heapDelta: val((med(c.name, 'heap') - bareHeap) / MiB, 'MiB') }),
    });
  }
  res.write();
  process.stdout.write(`\n${lines.join('\n')}\n\n(median of ${runs} fresh processes per row, ABBA order; Node ${process.version}, ${cpus().length} CPUs, ` +
    `load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}; dist/ compiled JS; Δ = minus bare node)\n`);
}

main();
