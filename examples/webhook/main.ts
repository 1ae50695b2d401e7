/**
 * webhook: admission webhooks for a resource of your own, as `kubebuilder create webhook --defaulting
 * --programmatic-validation` scaffolds them, on ts-controller-manager. The Cache (crd.yaml) gets:
 *   - a defaulting webhook: `spec.size` by tier when it is missing (production 3, development 1) — a default a
 *     schema cannot express, since it depends on another field;
 *   - a validating webhook: at most 10 Pods per Cache (denied with a message saying so), and a warning for an image
 *     without a pinned tag (allowed; kubectl prints it).
 * The API server calls them by config/webhook/manifests.yaml (through the Service there, with a certificate from
 * cert-manager or the manager's self-managed certificates; see docs/webhooks.md). Built only on the public entry point.
 *   ts-controller-manager gen types --out api crd.yaml    # writes api/example/v1/zz_generated.types.ts
 *   node main.ts   (env: WEBHOOK_BIND_ADDRESS, default :9443; WEBHOOK_CERT_DIR holding tls.crt/tls.key,
 *                   default /tmp/k8s-webhook-server/serving-certs; PROBE_ADDRESS, default :8081)
 */
import { ControllerManager, denied, type ValidationResult } from 'ts-controller-manager';
import { cacheResource, type Cache, type CacheSpec } from './api/example/v1/zz_generated.types.ts';

const maxSize = 10;

/**
 * Sizes a Cache by its tier when `spec.size` is missing. The type says size is there: the schema requires it, but the
 * API server checks the schema after the mutating webhooks ran — so here it may be missing (hence Partial).
 */
function defaultCache(cache: Cache): void {
  const spec: Partial<CacheSpec> = (cache.spec ??= {} as CacheSpec);
  spec.size ??= spec.tier === 'production' ? 3 : 1;
}

/** Refuses more than `maxSize` Pods, saying how many were asked; warns about an image that pins nothing. */
function validateCache(cache: Cache): ValidationResult {
  const size = cache.spec?.size ?? 0;
  if (size > maxSize) return denied(`spec.size: ${size} Pods asked, at most ${maxSize} per Cache; split it into several Caches`);
  const image = cache.spec?.image;
  const tag = image?.includes('@') ? 'digest' : image?.split('/').pop()?.split(':')[1];
  if (image && (tag === undefined || tag === 'latest')) {
    return [`spec.image "${image}" is not pinned to a version: every Pod restart may run a different one`];
  }
  return [];
}

const env = process.env;
const mgr = new ControllerManager({
  healthProbeBindAddress: env['PROBE_ADDRESS'] ?? ':8081',
  webhook: { bindAddress: env['WEBHOOK_BIND_ADDRESS'] ?? ':9443', ...(env['WEBHOOK_CERT_DIR'] ? { certDir: env['WEBHOOK_CERT_DIR'] } : {}) },
});
mgr.webhook<Cache>(cacheResource) // paths as kubebuilder makes them: /mutate-…-v1-cache, /validate-…-v1-cache
  .withDefaulter(defaultCache)
  .withValidator({ validateCreate: validateCache, validateUpdate: (_old, cache) => validateCache(cache) })
  .complete();
process.exitCode = await mgr.run();
