/**
 * A finalizer added while a DELETE is under way is ignored by the API server (kubernetes/kubernetes#77988, open; the
 * fix, kubernetes/kubernetes#133995, is not in v1.34–v1.37): the DELETE reads the object, sees no finalizer, and
 * removes it from etcd — even though, between its read and its removal, a controller added its finalizer and was
 * answered 200. The endurance bench's one-cycle test met it (CI of 200736e): a Network deleted by the churn right as
 * the new leader added our finalizer and created its Neutron network; the Network went without finalize(), and the
 * Neutron network leaked.
 *
 * Here the window is opened deterministically on a real kube-apiserver (startTestEnv) and a REAL neutron-server: a
 * validating webhook on DELETE of Networks (our own, in this process) holds the API server inside the DELETE — after
 * its finalizer check, before its removal from etcd — while the Network controller (the binary's setup, in-process)
 * adds its finalizer, creates the Neutron network and subnet and reports Ready. The webhook then allows the DELETE.
 * Shown: the API server deletes the Network with our finalizer still on it (the DELETE answers Status Success, as
 * for an object without finalizers, not the object marked for deletion) — the upstream race, on this release — and the controller still deletes what it
 * made in Neutron (pkg/controllers/network/controller.ts, BypassedFinalizers; after a GET confirms the UID is gone):
 * nothing of that UID is left. The controller runs as the manager's ServiceAccount with config/rbac.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { Network } from '../pkg/apis/samplecrd/v1/types.ts';
import { networkControllerSetup } from '../pkg/controllers/network/controller.ts';
import { FINALIZER, neutronDescription, uidTag } from '../pkg/controllers/network/desired.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { eventually, startTestEnv, type TestEnv } from '../pkg/testing/index.ts';
import type { WebhookConfiguration } from '../pkg/testing/webhooks.ts';
import { repoRoot } from './helpers/crds.ts';
import { neutronApi, startNeutron, type NeutronApi, type NeutronInstance } from './helpers/neutron.ts';

const NEUTRON_START_TIMEOUT = 15 * 60_000;
const networks = '/apis/samplecrd.k8s.io/v1/namespaces/default/networks';
const holdPath = '/hold-network-delete';

const holdDelete: WebhookConfiguration = {
  apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: 'tscm-test-hold-network-delete' },
  webhooks: [{
    name: 'hold-delete.networks.test.ts-controller-manager.io',
    clientConfig: { service: { name: 'unused', namespace: 'default', path: holdPath } },
    rules: [{ apiGroups: ['samplecrd.k8s.io'], apiVersions: ['v1'], operations: ['DELETE'], resources: ['networks'] }],
    failurePolicy: 'Fail', sideEffects: 'None', admissionReviewVersions: ['v1'], timeoutSeconds: 30,
  }],
};

/** The webhook server: allows every DELETE, but holds the first one of `armed` until `release()`. */
class DeleteHolder {
  readonly server: Server;
  private armed: string | undefined;
  private onHeld: (() => void) | undefined;
  private releaseHeld: (() => void) | undefined;
  calls = 0;

  constructor(certDir: string) {
    this.server = createServer({ cert: readFileSync(join(certDir, 'tls.crt')), key: readFileSync(join(certDir, 'tls.key')) }, (req, res) => {
      if (req.url?.split('?')[0] !== holdPath) {
        res.writeHead(404).end(); // waitForWebhooks' probes: an HTTP answer is what they wait for
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request: { uid: string; name: string } };
          this.calls++;
          if (this.armed !== undefined && review.request.name === this.armed) {
            this.armed = undefined;
            const released = new Promise<void>((resolve) => { this.releaseHeld = resolve; });
            this.onHeld?.();
            await released;
          }
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
            apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: true },
          }));
        })();
      });
    });
  }

  /** Resolves once the API server is inside a DELETE of `name` (calling this webhook), which is then held. */
  hold(name: string): Promise<void> {
    this.armed = name;
    return new Promise((resolve) => { this.onHeld = resolve; });
  }

  release(): void {
    this.releaseHeld?.();
  }
}

describe('a finalizer added while a DELETE is under way (kubernetes#77988): the API server deletes the Network anyway, and the controller still deletes what it made in Neutron', () => {
  let env: TestEnv;
  let holder: DeleteHolder;
  let neutron: NeutronInstance;
  let api: NeutronApi;

  before(async () => {
    [env, neutron] = await Promise.all([
      startTestEnv({
        crdPaths: [join(repoRoot, 'config', 'crd', 'bases', 'samplecrd.k8s.io_networks.yaml')], webhooks: { validatingWebhooks: [holdDelete] },
        rbacPaths: [join(repoRoot, 'config', 'rbac')], // the controller runs as the manager's ServiceAccount
      }),
      startNeutron(),
    ]);
    api = neutronApi(neutron.endpoint);
    const serving = env.webhook;
    assert.ok(serving);
    holder = new DeleteHolder(serving.certDir);
    await new Promise<void>((resolve) => holder.server.listen(serving.port, serving.host, resolve));
    await env.waitForWebhooks();
  }, { timeout: NEUTRON_START_TIMEOUT });

  after(async () => {
    holder?.release();
    holder?.server.closeAllConnections();
    await new Promise<void>((resolve) => (holder ? holder.server.close(() => resolve()) : resolve()));
    await env?.stop();
    await neutron?.stop();
  });

  /** Networks and subnets neutron-server has of `uid` (its tag or its description), read through Neutron's own API. */
  async function neutronOf(uid: string): Promise<{ networks: string[]; subnets: string[] }> {
    const ours = (o: Record<string, unknown>): boolean => (Array.isArray(o['tags']) && (o['tags'] as unknown[]).includes(uidTag(uid))) || o['description'] === neutronDescription(uid);
    return {
      networks: (await api.networks()).filter(ours).map((n) => String(n['id'])),
      subnets: (await api.subnets()).filter(ours).map((s) => String(s['id'])),
    };
  }

  test('the DELETE removes the Network with our finalizer on it; the controller deletes its Neutron network and subnet', async (t) => {
    const created = await env.client.json<Network>('POST', networks, {
      body: { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 'raced' }, spec: { cidr: '10.77.0.0/24', gateway: '10.77.0.1' } },
    });
    const uid = created.metadata?.uid ?? '';

    // 1. A DELETE of the Network (no finalizer yet), held by the webhook inside the API server, past its finalizer check.
    const held = holder.hold('raced');
    const deleting = env.client.json<Network>('DELETE', `${networks}/raced`);
    deleting.catch(() => undefined); // awaited below
    await held;

    // 2. Meanwhile the Network controller (the binary's setup) adds its finalizer and creates in Neutron.
    const mgr = new ControllerManager({
      ...env.managerConnection, namespaces: ['default'], syncPeriodMs: 0, registry: new Registry(), logger: silentLogger,
      userAgent: 'network-finalizer-race-test', gracefulShutdownTimeoutMs: 10_000,
    });
    assert.ok(networkControllerSetup.setup(mgr, { concurrency: 1, neutron: { cloudConfig: neutron.cloudsYaml, cloud: 'local' } }));
    const ac = new AbortController();
    const exited = mgr.start(ac.signal);
    t.after(async () => {
      ac.abort();
      assert.equal(await exited, 0, 'the manager stops cleanly');
    });
    const ready = await eventually(async () => {
      const n = await env.client.json<Network>('GET', `${networks}/raced`);
      const r = n.status?.conditions?.find((c) => c.type === 'Ready');
      assert.equal(r?.status, 'True', `the Network Ready while the DELETE is held (now: ${JSON.stringify(r)})`);
      return n;
    }, { timeoutMs: 20_000 });
    assert.deepEqual(ready.metadata?.finalizers, [FINALIZER], 'our finalizer is on the Network (the server answered our patch)');
    assert.equal(ready.metadata?.deletionTimestamp, undefined);
    const made = await neutronOf(uid);
    assert.equal(made.networks.length, 1, 'one Neutron network made for the Network');
    assert.equal(made.subnets.length, 1, 'one Neutron subnet made for the Network');

    // 3. The DELETE goes on: the API server removes the Network although it carries our finalizer (the upstream race).
    holder.release();
    // An object with finalizers would be answered as marked for deletion (deletionTimestamp); this one was removed at
    // once: the API server answers Status Success.
    const deleted = (await deleting) as unknown as { kind?: string; status?: string; details?: { uid?: string } };
    assert.equal(deleted.kind, 'Status', `the DELETE removed the Network at once (answer: ${JSON.stringify(deleted)})`);
    assert.equal(deleted.status, 'Success');
    assert.equal(deleted.details?.uid, uid);
    await assert.rejects(env.client.json('GET', `${networks}/raced`), (err: unknown) => (err as { status?: number }).status === 404, 'the Network is gone');

    // 4. The controller deletes what it made in Neutron anyway: nothing of that UID is left.
    await eventually(async () => {
      assert.deepEqual(await neutronOf(uid), { networks: [], subnets: [] }, 'nothing in Neutron of the deleted Network');
      return true;
    }, { timeoutMs: 30_000 });
    assert.deepEqual(env.refusals, [], 'the manager\'s RBAC (config/rbac) allowed every request it made, the confirming GET included');
  });
});
