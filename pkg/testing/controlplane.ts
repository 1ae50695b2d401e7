/**
 * The minimal control plane — etcd + kube-apiserver on loopback — as command lines, plus its admin kubeconfig and a
 * health probe. One definition shared by the test environment (`ts-controller-manager/testing`, env.ts) and the
 * repository's own harness (test/cluster/controlplane.ts, which adds kube-controller-manager, kube-scheduler and kwok
 * in full mode), so both run the same flags.
 *
 * What the flags give (as controller-runtime's envtest): RBAC authorization with an admin client certificate in
 * `system:masters`, ServiceAccount token signing (TokenRequest API), CRDs, Leases; the ServiceAccount admission plugin
 * off (Pods need no token controller); etcd without fsync (throw-away data).
 * Layout under `dir`: `etcd/data`, `kube-apiserver/` (its cert dir); callers put logs where they like.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { Pki } from './pki.ts';

export interface ComponentCommand {
  bin: string;
  args: string[];
  /** URL polled until it answers 200. */
  health: string;
}

/** etcd serving clients on http://127.0.0.1:`port`, its data in `<dir>/etcd/data`; health: `<url>/health`. */
export function etcdCommand(opts: { dir: string; bin: string; port: number; peerPort: number }): ComponentCommand & { url: string } {
  const url = `http://127.0.0.1:${opts.port}`;
  const peerURL = `http://127.0.0.1:${opts.peerPort}`;
  return {
    url,
    bin: opts.bin,
    args: [
      '--name=tscm', `--data-dir=${join(opts.dir, 'etcd', 'data')}`,
      `--listen-client-urls=${url}`, `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peerURL}`, `--initial-advertise-peer-urls=${peerURL}`,
      `--initial-cluster=tscm=${peerURL}`, '--unsafe-no-fsync=true', '--log-level=warn',
    ],
    health: `${url}/health`,
  };
}

/**
 * kube-apiserver on https://`address`:`port` (address defaults to 127.0.0.1; another address must be in the serving
 * certificate, createPki's `extraIPs`) over the etcd at `etcdURL`, serving with `pki` (its cert dir is
 * `<dir>/kube-apiserver`); health: `<server>/readyz`.
 */
export function kubeApiserverCommand(opts: {
  dir: string; bin: string; port: number; etcdURL: string; pki: Pki; address?: string;
}): ComponentCommand & { server: string } {
  const { pki, port } = opts;
  const address = opts.address ?? '127.0.0.1';
  const server = `https://${address}:${port}`;
  return {
    server,
    bin: opts.bin,
    args: [
      `--etcd-servers=${opts.etcdURL}`, `--bind-address=${address}`, `--advertise-address=${address}`,
      `--secure-port=${port}`, `--cert-dir=${join(opts.dir, 'kube-apiserver')}`,
      `--tls-cert-file=${pki.servingCert}`, `--tls-private-key-file=${pki.servingKey}`,
      `--client-ca-file=${pki.caCert}`, '--authorization-mode=RBAC',
      '--service-cluster-ip-range=10.0.0.0/24', '--allow-privileged=true',
      `--service-account-issuer=${server}/`,
      `--service-account-key-file=${pki.saPublicKey}`, `--service-account-signing-key-file=${pki.saPrivateKey}`,
      // As envtest does: Pods need no ServiceAccount controller to be admitted.
      '--disable-admission-plugins=ServiceAccount',
      // As on hardened clusters: setting blockOwnerDeletion needs `update` on the owner's finalizers subresource,
      // so RBAC tests see that requirement.
      '--enable-admission-plugins=OwnerReferencesPermissionEnforcement',
      '--profiling=false', '--v=0',
      // A loopback advertise address cannot be the `kubernetes` Service's endpoint (Endpoints validation refuses
      // 127.0.0.0/8 and ::1): kube-apiserver v1.37 refuses to start with one unless the endpoint reconciler is off
      // (kubernetes/kubernetes#138102); earlier releases started but could not write that Endpoints object (#121942). Off
      // on every release alike: nothing reaches the API server through that Service over loopback.
      ...(isLoopback(address) ? ['--endpoint-reconciler-type=none'] : []),
    ],
    health: `${server}/readyz`,
  };
}

/** Whether `address` is an IPv4 loopback (127.0.0.0/8) or the IPv6 one. */
function isLoopback(address: string): boolean {
  return /^127\.\d+\.\d+\.\d+$/.test(address) || address === '::1';
}

/** The admin kubeconfig (client certificate in `system:masters`, data inlined) for `server`. */
export function adminKubeconfig(server: string, pki: Pki): string {
  const b64 = (file: string): string => readFileSync(file).toString('base64');
  // JSON is valid YAML; kubectl and client-node read it as a kubeconfig.
  return `${JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'tscm-local', cluster: { server, 'certificate-authority-data': b64(pki.caCert) } }],
    users: [{ name: 'tscm-admin', user: { 'client-certificate-data': b64(pki.adminCert), 'client-key-data': b64(pki.adminKey) } }],
    contexts: [{ name: 'tscm-local', context: { cluster: 'tscm-local', user: 'tscm-admin', namespace: 'default' } }],
    'current-context': 'tscm-local',
  }, null, 2)}\n`;
}

/**
 * One GET of a health URL: plain HTTP, or HTTPS trusting the control plane's CA with the admin client certificate.
 * Resolves with the status and body; rejects on connection errors and after `timeoutMs`.
 */
export function probe(url: string, pki: Pki, timeoutMs = 5_000): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  const tls = u.protocol === 'https:'
    ? { ca: readFileSync(pki.caCert), cert: readFileSync(pki.adminCert), key: readFileSync(pki.adminKey) }
    : {};
  return new Promise((res, rej) => {
    const req = (u.protocol === 'https:' ? httpsRequest : httpRequest)(u, { method: 'GET', timeout: timeoutMs, ...tls }, (resp) => {
      let body = '';
      resp.setEncoding('utf8').on('data', (c: string) => (body += c));
      resp.on('end', () => res({ status: resp.statusCode ?? 0, body }));
      resp.on('error', rej);
    });
    req.on('timeout', () => req.destroy(new Error(`timeout: GET ${url}`)));
    req.on('error', rej);
    req.end();
  });
}
