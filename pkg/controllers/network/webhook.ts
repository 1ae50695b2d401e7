/**
 * The Network webhooks the manager serves (docs/webhooks.md "The manager's own webhooks"):
 *
 *  - validating, one per served version: `/validate-samplecrd-k8s-io-v1-network` and `…-v2-network`. Each checks the
 *    object as written, in its own version, with `validateNetwork` (validation.ts) — the function whose message the
 *    controller reports as `Ready=False InvalidSpec` — and denies with exactly that message. The webhook
 *    configuration uses `matchPolicy: Exact` per version, so a v1 write is checked as v1 (v1 field paths), once.
 *    CREATE: an invalid Network is refused. UPDATE: refused only when the update changes what the spec is made of
 *    (`spec`, or on v1 the conversion annotation that carries v2's other subnets) and the result is invalid — a
 *    Network that became invalid before the webhook existed can still get its finalizer removed, labels changed and
 *    be deleted. DELETE is never refused. Status writes (`/status`) are not sent here (the rules list `networks`).
 *  - conversion on `/convert`: hub v2, spoke v1 (`toHub`/`fromHub` of pkg/apis/samplecrd/v2, lossless both ways).
 */
import { isDeepStrictEqual } from 'node:util';
import type { Network as NetworkV1 } from '../../apis/samplecrd/v1/types.ts';
import { fromHub, toHub, v2SubnetsAnnotation } from '../../apis/samplecrd/v2/conversion.ts';
import type { Network as NetworkV2 } from '../../apis/samplecrd/v2/types.ts';
import type { KubeObject } from '../../apimachinery/meta.ts';
import type { ControllerManager } from '../../runtime/manager.ts';
import { denied, type ValidationResult, type Validator } from '../../webhook/admission.ts';
import type { Conversion } from '../../webhook/conversion.ts';
import { networkResource, networkV2Resource } from './desired.ts';
import { validateNetwork } from './validation.ts';

type AnyNetwork = NetworkV1 | NetworkV2;

/** What an update must change for its validity to be checked: the spec and, on v1, the conversion annotation. */
function specOf(n: AnyNetwork): unknown {
  return [n.spec, n.metadata?.annotations?.[v2SubnetsAnnotation]];
}

function check(n: AnyNetwork): ValidationResult {
  const v = validateNetwork(n);
  return v.ok ? undefined : denied(v.message);
}

/** The validator both versions' webhooks run (validateNetwork picks the version by `apiVersion`). */
export const networkValidator: Validator<AnyNetwork> = {
  validateCreate: (n) => check(n),
  validateUpdate: (oldN, n) => (isDeepStrictEqual(specOf(oldN), specOf(n)) ? undefined : check(n)),
};

/** Hub v2, spoke v1 (the webhook server dispatches by apiVersion, so each function gets an object of its version). */
export const networkConversion: Conversion = {
  hub: 'v2',
  spokes: {
    v1: {
      toHub: (obj: KubeObject) => toHub(obj),
      fromHub: (hub: KubeObject) => fromHub(hub),
    },
  },
};

/** Registers the Network validating webhooks (v1, v2) and the conversion on `mgr` (which starts its webhook server). */
export function setupNetworkWebhooks(mgr: ControllerManager): void {
  mgr.webhook<AnyNetwork>(networkResource).withValidator(networkValidator).complete();
  mgr.webhook<AnyNetwork>(networkV2Resource).withValidator(networkValidator).withConversion(networkConversion).complete();
}
