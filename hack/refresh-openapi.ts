/**
 * Refreshes pkg/api/openapi/*_openapi.json — the OpenAPI v3 documents the built-in API types (pkg/api/<group>/<version>/)
 * are generated from — from the pinned kube-apiserver (the cached control plane binaries; `make tools` builds them),
 * then regenerates the types. `make openapi` / `npm run refresh-openapi` run this; nothing else needs a cluster.
 *
 *   node hack/refresh-openapi.ts
 *
 * Each file is the document the API server serves at /openapi/v3/<path> with `paths` removed (the operations: three
 * times the size, and not used by the generator) and a field `x-ts-controller-manager` recording the server version
 * and path. File names follow kubernetes/api/openapi-spec/v3: apis/apps/v1 → apis__apps__v1_openapi.json.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startTestEnv } from '../pkg/testing/index.ts';

/** The group/versions whose types are generated (and whatever their schemas refer to, e.g. autoscaling/v1 Scale). */
export const openAPIPaths = [
  'api/v1', 'apis/admissionregistration.k8s.io/v1', 'apis/apiextensions.k8s.io/v1', 'apis/apps/v1',
  'apis/autoscaling/v2', 'apis/batch/v1', 'apis/coordination.k8s.io/v1', 'apis/events.k8s.io/v1',
  'apis/networking.k8s.io/v1', 'apis/policy/v1', 'apis/rbac.authorization.k8s.io/v1',
];

const root = resolve(import.meta.dirname, '..');
const outDir = join(root, 'pkg/api/openapi');

const env = await startTestEnv({ log: (m) => console.log(m) });
try {
  const { gitVersion } = await env.client.json<{ gitVersion: string }>('GET', '/version');
  const index = await env.client.json<{ paths: Record<string, { serverRelativeURL: string }> }>('GET', '/openapi/v3');
  mkdirSync(outDir, { recursive: true });
  for (const f of readdirSync(outDir)) if (f.endsWith('_openapi.json')) rmSync(join(outDir, f));
  for (const path of openAPIPaths) {
    const entry = index.paths[path];
    if (!entry) throw new Error(`kube-apiserver ${gitVersion} serves no /openapi/v3/${path}`);
    const doc = await env.client.json<Record<string, unknown>>('GET', entry.serverRelativeURL);
    const { paths: _paths, ...rest } = doc;
    const file = `${path.replace(/\//g, '__')}_openapi.json`;
    writeFileSync(join(outDir, file), `${JSON.stringify({ ...rest, 'x-ts-controller-manager': { kubeApiserver: gitVersion, path: `/openapi/v3/${path}`, removed: ['paths'] } }, null, 1)}\n`);
    console.log(`wrote pkg/api/openapi/${file}`);
  }
} finally {
  await env.stop();
}
const gen = spawnSync(process.execPath, [join(root, 'cmd/manager/main.ts'), 'gen', 'types', '--out', 'pkg/api', 'pkg/api/openapi'], { cwd: root, stdio: 'inherit' });
process.exitCode = gen.status ?? 1;
