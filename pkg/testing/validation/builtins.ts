/**
 * What kube-apiserver fills in on the built-in kinds controllers commonly write, for the FakeClient: the defaulting
 * functions of k8s.io/kubernetes pkg/apis/{core,apps}/v1 (SetDefaults_* and the generated walks that call them), the
 * registry strategies' PrepareForCreate (status reset), conversion (a Secret's `stringData` merged into `data`), the
 * admission plugins on by default in startTestEnv (DefaultTolerationSeconds, Priority) and the Service registry's
 * allocation (cluster IP, node ports). Pure but for the allocator the caller passes. Every default here is compared
 * with a real kube-apiserver's whole answer by test/fakeclient-conformance.test.ts.
 *
 * Kinds: Deployment and ReplicaSet (and their Pod templates), Pod, Service, Secret, Namespace; ConfigMaps, Events,
 * Leases and Nodes have nothing to default here. Other built-ins a test registers (`resources`) get no defaults.
 *
 * Allocation is the server's, not a default: the fake allocates cluster IPs from 10.0.0.0/24 (startTestEnv's
 * --service-cluster-ip-range) and node ports from 30000–32767, never two alike, from its random source (a seeded
 * fake allocates the same ones every run). A test must not expect a particular address or port.
 */
import { canonicalQuantity, canonicalResource } from './quantity.ts';

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (parent: Json, key: string): Json => {
  const v = parent[key];
  if (isObj(v)) return v;
  const o: Json = {};
  parent[key] = o;
  return o;
};
const list = (parent: Json, key: string): Json[] => (Array.isArray(parent[key]) ? (parent[key] as unknown[]).filter(isObj) : []);
const unset = (v: unknown): boolean => v === undefined || v === null || v === '';

/** Where the Service registry allocates from (the FakeClient keeps one per store). */
export interface ServiceAllocator {
  /** A free cluster IP (IPv4). */
  clusterIP(): string;
  /** A free node port, not one of `taken` (those of the Service being written). */
  nodePort(taken: ReadonlySet<unknown>): number;
}

/** The image's tag as ParseImageName finds it ('latest' when none and no digest). */
function imageTag(image: string): string {
  if (image.includes('@')) return '';
  const lastSlash = image.lastIndexOf('/');
  const colon = image.indexOf(':', lastSlash + 1);
  return colon >= 0 ? image.slice(colon + 1) : 'latest';
}

function defaultContainer(c: Json): void {
  if (unset(c['imagePullPolicy'])) c['imagePullPolicy'] = imageTag(typeof c['image'] === 'string' ? c['image'] : '') === 'latest' ? 'Always' : 'IfNotPresent';
  if (unset(c['terminationMessagePath'])) c['terminationMessagePath'] = '/dev/termination-log';
  if (unset(c['terminationMessagePolicy'])) c['terminationMessagePolicy'] = 'File';
  if (!isObj(c['resources'])) c['resources'] = {};
  canonicalResources(c['resources'] as Json);
  for (const p of list(c, 'ports')) if (unset(p['protocol'])) p['protocol'] = 'TCP';
  for (const e of list(c, 'env')) {
    const from = e['valueFrom'];
    if (isObj(from)) {
      if (isObj(from['fieldRef']) && unset(from['fieldRef']['apiVersion'])) from['fieldRef']['apiVersion'] = 'v1';
      if (isObj(from['fileKeyRef']) && from['fileKeyRef']['optional'] === undefined) from['fileKeyRef']['optional'] = false;
    }
  }
  for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe']) {
    const p = c[probe];
    if (!isObj(p)) continue;
    if (!p['timeoutSeconds']) p['timeoutSeconds'] = 1;
    if (!p['periodSeconds']) p['periodSeconds'] = 10;
    if (!p['successThreshold']) p['successThreshold'] = 1;
    if (!p['failureThreshold']) p['failureThreshold'] = 3;
    if (isObj(p['httpGet'])) defaultHTTPGet(p['httpGet']);
    if (isObj(p['grpc']) && p['grpc']['service'] === undefined) p['grpc']['service'] = '';
  }
  const lc = c['lifecycle'];
  if (isObj(lc)) for (const h of ['postStart', 'preStop']) if (isObj(lc[h]) && isObj(lc[h]['httpGet'])) defaultHTTPGet(lc[h]['httpGet']);
}

/** SetDefaults_ResourceList on `limits` and `requests`: each quantity rounded up to milli precision, in canonical form. */
function canonicalResources(r: Json): void {
  for (const k of ['limits', 'requests']) {
    const l = r[k];
    if (!isObj(l)) continue;
    for (const [name, q] of Object.entries(l)) l[name] = canonicalResource(q) ?? q;
  }
}

function defaultHTTPGet(h: Json): void {
  if (unset(h['path'])) h['path'] = '/';
  if (unset(h['scheme'])) h['scheme'] = 'HTTP';
}

function defaultVolume(v: Json): void {
  const sources = ['hostPath', 'emptyDir', 'gcePersistentDisk', 'awsElasticBlockStore', 'gitRepo', 'secret', 'nfs', 'iscsi', 'glusterfs',
    'persistentVolumeClaim', 'rbd', 'flexVolume', 'cinder', 'cephfs', 'flocker', 'downwardAPI', 'fc', 'azureFile', 'configMap',
    'vsphereVolume', 'quobyte', 'azureDisk', 'photonPersistentDisk', 'projected', 'portworxVolume', 'scaleIO', 'storageos', 'csi', 'ephemeral', 'image'];
  if (!sources.some((s) => v[s] !== undefined && v[s] !== null)) v['emptyDir'] = {};
  if (isObj(v['hostPath']) && v['hostPath']['type'] === undefined) v['hostPath']['type'] = '';
  if (isObj(v['emptyDir']) && v['emptyDir']['sizeLimit'] !== undefined) v['emptyDir']['sizeLimit'] = canonicalQuantity(v['emptyDir']['sizeLimit']) ?? v['emptyDir']['sizeLimit'];
  for (const k of ['secret', 'configMap', 'downwardAPI', 'projected']) if (isObj(v[k]) && v[k]['defaultMode'] === undefined) v[k]['defaultMode'] = 420;
  if (isObj(v['downwardAPI'])) for (const item of list(v['downwardAPI'], 'items')) fieldRefDefault(item);
  if (isObj(v['projected'])) {
    for (const src of list(v['projected'], 'sources')) {
      if (isObj(src['downwardAPI'])) for (const item of list(src['downwardAPI'], 'items')) fieldRefDefault(item);
      if (isObj(src['serviceAccountToken']) && src['serviceAccountToken']['expirationSeconds'] === undefined) src['serviceAccountToken']['expirationSeconds'] = 3600;
    }
  }
}

function fieldRefDefault(item: Json): void {
  if (isObj(item['fieldRef']) && unset(item['fieldRef']['apiVersion'])) item['fieldRef']['apiVersion'] = 'v1';
}

/** SetDefaults_PodSpec and the generated walk over containers, init containers and volumes. */
export function defaultPodSpec(spec: Json): void {
  if (unset(spec['dnsPolicy'])) spec['dnsPolicy'] = 'ClusterFirst';
  if (unset(spec['restartPolicy'])) spec['restartPolicy'] = 'Always';
  if (!isObj(spec['securityContext'])) spec['securityContext'] = {};
  if (spec['terminationGracePeriodSeconds'] === undefined || spec['terminationGracePeriodSeconds'] === null) spec['terminationGracePeriodSeconds'] = 30;
  if (unset(spec['schedulerName'])) spec['schedulerName'] = 'default-scheduler';
  for (const v of list(spec, 'volumes')) defaultVolume(v);
  if (isObj(spec['resources'])) canonicalResources(spec['resources']);
  if (isObj(spec['overhead'])) for (const [name, q] of Object.entries(spec['overhead'])) (spec['overhead'])[name] = canonicalResource(q) ?? q;
  for (const c of [...list(spec, 'initContainers'), ...list(spec, 'containers'), ...list(spec, 'ephemeralContainers')]) defaultContainer(c);
}

/** A pod template (Deployment, ReplicaSet): its spec defaulted; `metadata` kept as given. */
function defaultTemplate(spec: Json): void {
  const template = obj(spec, 'template');
  defaultPodSpec(obj(template, 'spec'));
}

function defaultDeployment(o: Json, create: boolean): void {
  const spec = obj(o, 'spec');
  if (spec['replicas'] === undefined || spec['replicas'] === null) spec['replicas'] = 1;
  const strategy = obj(spec, 'strategy');
  if (unset(strategy['type'])) strategy['type'] = 'RollingUpdate';
  if (strategy['type'] === 'RollingUpdate') {
    const ru = obj(strategy, 'rollingUpdate');
    if (ru['maxUnavailable'] === undefined || ru['maxUnavailable'] === null) ru['maxUnavailable'] = '25%';
    if (ru['maxSurge'] === undefined || ru['maxSurge'] === null) ru['maxSurge'] = '25%';
  }
  if (spec['revisionHistoryLimit'] === undefined || spec['revisionHistoryLimit'] === null) spec['revisionHistoryLimit'] = 10;
  if (spec['progressDeadlineSeconds'] === undefined || spec['progressDeadlineSeconds'] === null) spec['progressDeadlineSeconds'] = 600;
  defaultTemplate(spec);
  if (create) o['status'] = {};
}

function defaultReplicaSet(o: Json, create: boolean): void {
  const spec = obj(o, 'spec');
  if (spec['replicas'] === undefined || spec['replicas'] === null) spec['replicas'] = 1;
  defaultTemplate(spec);
  if (create) o['status'] = { replicas: 0 };
}

const notReadyToleration = { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 };
const unreachableToleration = { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 };

/** The QoS class of a pod's containers (Guaranteed: every container limits cpu and memory equal to requests). */
function qosClass(spec: Json): string {
  const containers = [...list(spec, 'initContainers'), ...list(spec, 'containers')];
  let any = false;
  let guaranteed = true;
  for (const c of containers) {
    const r = isObj(c['resources']) ? c['resources'] : {};
    const req = isObj(r['requests']) ? r['requests'] : {};
    const lim = isObj(r['limits']) ? r['limits'] : {};
    if (Object.keys(req).length || Object.keys(lim).length) any = true;
    for (const k of ['cpu', 'memory']) {
      if (lim[k] === undefined || (req[k] !== undefined && JSON.stringify(req[k]) !== JSON.stringify(lim[k]))) guaranteed = false;
    }
  }
  if (!any) return 'BestEffort';
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

function defaultPod(o: Json, create: boolean): void {
  const spec = obj(o, 'spec');
  for (const c of [...list(spec, 'containers'), ...list(spec, 'initContainers')]) {
    const r = isObj(c['resources']) ? c['resources'] : undefined;
    if (r && isObj(r['limits'])) {
      const req = obj(r, 'requests');
      for (const [k, v] of Object.entries(r['limits'])) if (req[k] === undefined) req[k] = v;
    }
  }
  defaultPodSpec(spec);
  if (spec['enableServiceLinks'] === undefined || spec['enableServiceLinks'] === null) spec['enableServiceLinks'] = true;
  if (spec['hostNetwork'] === true) {
    for (const c of [...list(spec, 'containers'), ...list(spec, 'initContainers')]) for (const p of list(c, 'ports')) if (!p['hostPort']) p['hostPort'] = p['containerPort'];
  }
  if (!create) return;
  // Admission plugins on by default: DefaultTolerationSeconds, Priority.
  const tolerations = list(spec, 'tolerations');
  const tolerates = (key: string): boolean => tolerations.some((t) => (t['key'] === key || (unset(t['key']) && t['operator'] === 'Exists')) && (unset(t['effect']) || t['effect'] === 'NoExecute'));
  const add = [...(tolerates(notReadyToleration.key) ? [] : [notReadyToleration]), ...(tolerates(unreachableToleration.key) ? [] : [unreachableToleration])];
  if (add.length) spec['tolerations'] = [...(Array.isArray(spec['tolerations']) ? spec['tolerations'] as unknown[] : []), ...add.map((t) => ({ ...t }))];
  if (unset(spec['priorityClassName'])) {
    if (spec['priority'] === undefined) spec['priority'] = 0;
    if (spec['preemptionPolicy'] === undefined) spec['preemptionPolicy'] = 'PreemptLowerPriority';
  }
  o['status'] = { phase: 'Pending', qosClass: qosClass(spec) };
}

function defaultService(o: Json, old: Json | undefined, alloc: ServiceAllocator): void {
  const spec = obj(o, 'spec');
  if (unset(spec['sessionAffinity'])) spec['sessionAffinity'] = 'None';
  if (spec['sessionAffinity'] === 'None') delete spec['sessionAffinityConfig'];
  if (spec['sessionAffinity'] === 'ClientIP') {
    const cfg = obj(spec, 'sessionAffinityConfig');
    const ip = obj(cfg, 'clientIP');
    if (ip['timeoutSeconds'] === undefined || ip['timeoutSeconds'] === null) ip['timeoutSeconds'] = 10800;
  }
  if (unset(spec['type'])) spec['type'] = 'ClusterIP';
  const type = spec['type'];
  for (const p of list(spec, 'ports')) {
    if (unset(p['protocol'])) p['protocol'] = 'TCP';
    if (p['targetPort'] === undefined || p['targetPort'] === null || p['targetPort'] === 0 || p['targetPort'] === '') p['targetPort'] = p['port'];
  }
  const external = type === 'LoadBalancer' || type === 'NodePort' || (Array.isArray(spec['externalIPs']) && spec['externalIPs'].length > 0);
  if (external && unset(spec['externalTrafficPolicy'])) spec['externalTrafficPolicy'] = 'Cluster';
  if ((spec['internalTrafficPolicy'] === undefined || spec['internalTrafficPolicy'] === null) && (type === 'NodePort' || type === 'LoadBalancer' || type === 'ClusterIP')) {
    spec['internalTrafficPolicy'] = 'Cluster';
  }
  if (type === 'LoadBalancer' && (spec['allocateLoadBalancerNodePorts'] === undefined || spec['allocateLoadBalancerNodePorts'] === null)) spec['allocateLoadBalancerNodePorts'] = true;
  const oldSpec = old && isObj(old['spec']) ? old['spec'] : undefined;
  if (type !== 'ExternalName') {
    // patchAllocatedValues: an update that leaves them out keeps what was allocated.
    if (oldSpec && oldSpec['type'] !== 'ExternalName') {
      if (unset(spec['clusterIP']) && oldSpec['clusterIP'] !== undefined) spec['clusterIP'] = oldSpec['clusterIP'];
      if (!Array.isArray(spec['clusterIPs']) && Array.isArray(oldSpec['clusterIPs'])) spec['clusterIPs'] = [...oldSpec['clusterIPs'] as unknown[]];
      for (const k of ['ipFamilies', 'ipFamilyPolicy']) if (spec[k] === undefined && oldSpec[k] !== undefined) spec[k] = JSON.parse(JSON.stringify(oldSpec[k])) as unknown;
    }
    const headlessWithoutSelector = spec['clusterIP'] === 'None' && !(isObj(spec['selector']) && Object.keys(spec['selector']).length > 0);
    if (unset(spec['clusterIP'])) spec['clusterIP'] = alloc.clusterIP();
    if (!Array.isArray(spec['clusterIPs'])) spec['clusterIPs'] = [spec['clusterIP']];
    if (spec['ipFamilyPolicy'] === undefined || spec['ipFamilyPolicy'] === null) spec['ipFamilyPolicy'] = headlessWithoutSelector ? 'RequireDualStack' : 'SingleStack';
    if (!Array.isArray(spec['ipFamilies'])) spec['ipFamilies'] = headlessWithoutSelector || spec['ipFamilyPolicy'] === 'RequireDualStack' ? ['IPv4', 'IPv6'] : ['IPv4'];
  }
  const needsNodePorts = type === 'NodePort' || (type === 'LoadBalancer' && spec['allocateLoadBalancerNodePorts'] !== false);
  if (needsNodePorts) {
    const oldPorts = oldSpec && (oldSpec['type'] === 'NodePort' || oldSpec['type'] === 'LoadBalancer') ? list(oldSpec, 'ports') : [];
    const used = new Set(list(spec, 'ports').map((p) => p['nodePort']).filter((n) => n));
    for (const p of list(spec, 'ports')) {
      if (p['nodePort']) continue;
      const prev = oldPorts.find((q) => (q['name'] ?? '') === (p['name'] ?? ''))?.['nodePort'];
      p['nodePort'] = prev && !used.has(prev) ? prev : alloc.nodePort(used);
      used.add(p['nodePort']);
    }
  }
  if (type === 'LoadBalancer' && spec['externalTrafficPolicy'] === 'Local' && !spec['healthCheckNodePort']) {
    spec['healthCheckNodePort'] = oldSpec?.['healthCheckNodePort'] ?? alloc.nodePort(new Set(list(spec, 'ports').map((p) => p['nodePort'])));
  }
  if (!old) o['status'] = { loadBalancer: {} };
}

/** A Secret: `type` Opaque by default; `stringData` merged into `data` (base64) and dropped, as the API server converts it. */
function defaultSecret(o: Json): void {
  if (unset(o['type'])) o['type'] = 'Opaque';
  const sd = o['stringData'];
  if (isObj(sd)) {
    const data = obj(o, 'data');
    for (const [k, v] of Object.entries(sd)) data[k] = Buffer.from(String(v), 'utf8').toString('base64');
  }
  delete o['stringData'];
}

/**
 * Applies the server's defaults for a write of built-in `resourceId` ("deployments.apps/v1", "services/v1", …) to
 * `o` (the decoded body; `old` the stored object on an update). Mutates `o`.
 */
export function defaultBuiltin(resourceId: string, o: Json, old: Json | undefined, alloc: ServiceAllocator): void {
  const create = old === undefined;
  switch (resourceId) {
    case 'deployments.apps/v1': defaultDeployment(o, create); break;
    case 'replicasets.apps/v1': defaultReplicaSet(o, create); break;
    case 'pods/v1': defaultPod(o, create); break;
    case 'services/v1': defaultService(o, old, alloc); break;
    case 'secrets/v1': defaultSecret(o); break;
    case 'namespaces/v1': {
      const meta = obj(o, 'metadata');
      if (typeof meta['name'] === 'string' && meta['name']) obj(meta, 'labels')['kubernetes.io/metadata.name'] = meta['name'];
      break;
    }
    default: break;
  }
}
