/**
 * Immutable cache (issue 33 item 6): what deep-freezing every cached object costs, against the alternative of a copy
 * on every read. One process, `--objects` (default 10 000) Deployment-shaped objects as the API server sends them
 * (managedFields stripped, as the informer's default transform does), `--rounds` rounds (default 5) in which the two
 * sides alternate order (ABBA). Per round and per object:
 *
 *  - decode: `JSON.parse` of the object's text (what every watch event costs anyway, for scale);
 *  - freeze: `deepFreeze` (pkg/informerfactory/object.ts), paid once when the object enters the cache;
 *  - copy-on-read: `structuredClone`, paid on EVERY read a reconcile makes;
 *  - reads: 20 reads of three fields from each object, frozen vs not (does a frozen object read slower?);
 *  - heap: V8 heap used after a full GC holding all objects, frozen vs not.
 *
 *   node --expose-gc bench/freeze.ts [--objects 10000] [--rounds 5]
 *
 * Prints one markdown table (medians, min–max) on stdout.
 */
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { deepFreeze } from '../pkg/informerfactory/object.ts';
import { BenchResults, ratio, spread } from './results.ts';

const { values: args } = parseArgs({ options: { objects: { type: 'string', default: '10000' }, rounds: { type: 'string', default: '5' } } });
const n = Number(args.objects);
const rounds = Number(args.rounds);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

function deployment(i: number): object {
  const t = '2026-11-26T10:00:00Z';
  return {
    apiVersion: 'apps/v1', kind: 'Deployment',
    metadata: {
      name: `foo-${i}`, namespace: 'default', uid: `0b6d1b2c-1111-2222-3333-${String(i).padStart(12, '0')}`, resourceVersion: String(1000 + i),
      generation: 1, creationTimestamp: t, labels: { app: 'nginx', controller: `foo-${i}` },
      ownerReferences: [{ apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: `foo-${i}`, uid: `u-${i}`, controller: true, blockOwnerDeletion: true }],
    },
    spec: {
      replicas: 1, selector: { matchLabels: { app: 'nginx', controller: `foo-${i}` } },
      template: {
        metadata: { labels: { app: 'nginx', controller: `foo-${i}` } },
        spec: {
          containers: [{ name: 'nginx', image: 'nginx:latest', resources: {}, terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File', imagePullPolicy: 'Always' }],
          restartPolicy: 'Always', terminationGracePeriodSeconds: 30, dnsPolicy: 'ClusterFirst', securityContext: {}, schedulerName: 'default-scheduler',
        },
      },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } }, revisionHistoryLimit: 10, progressDeadlineSeconds: 600,
    },
    status: {
      observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1,
      conditions: [
        { type: 'Available', status: 'True', lastUpdateTime: t, lastTransitionTime: t, reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' },
        { type: 'Progressing', status: 'True', lastUpdateTime: t, lastTransitionTime: t, reason: 'NewReplicaSetAvailable', message: `ReplicaSet "foo-${i}-abc" has successfully progressed.` },
      ],
    },
  };
}

interface D { metadata: { name: string }; spec: { replicas: number }; status: { availableReplicas: number } }
const texts = Array.from({ length: n }, (_, i) => JSON.stringify(deployment(i)));
const cpuUs = (f: () => void): number => {
  const t = process.cpuUsage();
  f();
  const d = process.cpuUsage(t);
  return d.user + d.system;
};
const decode = (): D[] => texts.map((s) => JSON.parse(s) as D);
let sink = 0;
const reads = (objs: D[]): void => {
  for (let r = 0; r < 20; r++) for (const o of objs) sink += o.spec.replicas + o.status.availableReplicas + o.metadata.name.length;
};
function heapHolding(objs: D[]): number {
  gc?.();
  gc?.();
  const used = process.memoryUsage().heapUsed;
  sink += objs.length;
  return used;
}

type Row = Record<'decode' | 'freeze' | 'clone' | 'readsFrozen' | 'readsPlain' | 'heapFrozen' | 'heapPlain', number>;
const results = new BenchResults('freeze', {
  name: 'JSON.parse and copy-on-read',
  description: 'decoding the same objects (JSON.parse) and a structuredClone per read, measured in the same rounds as deepFreeze',
});
const rows: Row[] = [];
for (let round = 0; round < rounds; round++) {
  const row = {} as Row;
  const sides = round % 4 === 0 || round % 4 === 3 ? ['frozen', 'plain'] : ['plain', 'frozen'];
  for (const side of sides) {
    gc();
    let objs: D[] = [];
    const dec = cpuUs(() => (objs = decode()));
    if (side === 'frozen') {
      row.decode = dec / n;
      row.freeze = cpuUs(() => objs.forEach((o) => deepFreeze(o))) / n;
      row.readsFrozen = cpuUs(() => reads(objs)) / n;
      row.heapFrozen = heapHolding(objs);
    } else {
      row.clone = cpuUs(() => objs.forEach((o) => structuredClone(o))) / n;
      row.readsPlain = cpuUs(() => reads(objs)) / n;
      row.heapPlain = heapHolding(objs);
    }
  }
  rows.push(row);
  results.sampleLoad();
}

const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const cell = (k: keyof Row, scale = 1, digits = 2): string => {
  const xs = rows.map((r) => r[k] / scale);
  return `${med(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;
};
const mib = 1024 * 1024;
const keys = ['decode', 'freeze', 'clone', 'readsFrozen', 'readsPlain'] as const;
for (const k of keys) results.set(`perObject.${k}`, spread(rows.map((r) => r[k]), 'CPU-µs'));
results.set('heap.frozen', spread(rows.map((r) => r.heapFrozen / mib), 'MiB'));
results.set('heap.plain', spread(rows.map((r) => r.heapPlain / mib), 'MiB'));
results.set('freezeOverDecode', ratio(med(rows.map((r) => r.freeze)), med(rows.map((r) => r.decode))));
results.set('objects', { value: n, unit: 'count' });
results.write();
process.stdout.write(
  `Immutable cache: ${n} Deployment-shaped objects, ${rounds} rounds (ABBA), Node ${process.version}, ${cpus().length} CPUs, load ${loadavg()[0]?.toFixed(1)}; medians (min–max)\n\n` +
    '| per object | µs CPU |\n|---|---:|\n' +
    `| decode (JSON.parse, for scale) | ${cell('decode')} |\n` +
    `| deepFreeze, once on arrival | ${cell('freeze')} |\n` +
    `| structuredClone, per read (copy-on-read) | ${cell('clone')} |\n` +
    `| 20 × 3 field reads, frozen | ${cell('readsFrozen')} |\n` +
    `| 20 × 3 field reads, not frozen | ${cell('readsPlain')} |\n\n` +
    `V8 heap used holding them: frozen ${cell('heapFrozen', mib, 1)} MiB, not frozen ${cell('heapPlain', mib, 1)} MiB.\n`,
);
if (sink === 0) process.stdout.write('\n');
