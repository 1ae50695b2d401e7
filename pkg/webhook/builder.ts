/**
 * WebhookBuilder: declares the webhooks of one type, in the shape of controller-runtime's `ctrl.NewWebhookManagedBy`:
 *
 *   mgr.webhook<Widget>(widgets)                              // ResourceType: group, version, kind
 *     .withDefaulter((w) => { w.spec.tier ??= 'standard'; })  // → /mutate-<group>-<version>-<kind>, JSON patch answer
 *     .withValidator({ validateCreate: (w) => w.spec.replicas > 10 ? denied('replicas must be at most 10') : [] })
 *                                                             // → /validate-<group>-<version>-<kind>
 *     .withConversion({ hub: 'v2', spokes: { v1: { toHub, fromHub } } })   // → /convert
 *     .complete();
 *
 * Contract: at least one of the three before `complete()`, each at most once; `complete()` registers the paths
 * (paths.ts) on the registrar — a ControllerManager (which then starts its webhook server) or a WebhookServer — and
 * throws if a path is already taken. The webhook configurations (ValidatingWebhookConfiguration,
 * MutatingWebhookConfiguration, the CRD's `conversion`) are not created here: point them at these paths.
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { mutatingHandler, validatingHandler, type Defaulter, type Validator } from './admission.ts';
import type { Conversion } from './conversion.ts';
import { mutatePath, validatePath, type GroupVersionKindLike } from './paths.ts';
import type { WebhookRegistrar } from './server.ts';

/**
 * Declares the webhooks of one type (controller-runtime's `NewWebhookManagedBy`): at least one of `withDefaulter`,
 * `withValidator`, `withConversion` (each at most once), then `complete()` registers the paths; it throws if a path
 * is already taken.
 */
export class WebhookBuilder<T extends KubeObject = KubeObject> {
  private readonly registrar: WebhookRegistrar;
  private readonly gvk: GroupVersionKindLike;
  private defaulter: Defaulter<T> | undefined;
  private validator: Validator<T> | undefined;
  private conversion: Conversion | undefined;
  private completed = false;

  /** Usually obtained from `mgr.webhook(type)`; `gvk` names the paths (`/mutate-<group with dashes>-<version>-<kind lower-case>`, …). */
  constructor(registrar: WebhookRegistrar, gvk: GroupVersionKindLike) {
    this.registrar = registrar;
    this.gvk = { group: gvk.group, version: gvk.version, kind: gvk.kind };
  }

  /** Serves a mutating webhook at `/mutate-…` that applies `fn` (admission.ts: Defaulter). */
  withDefaulter(fn: Defaulter<T>): this {
    if (this.defaulter) throw new Error(`${this.gvk.kind}: withDefaulter called twice`);
    this.defaulter = fn;
    return this;
  }

  /** Serves a validating webhook at `/validate-…` (admission.ts: Validator). */
  withValidator(v: Validator<T>): this {
    if (this.validator) throw new Error(`${this.gvk.kind}: withValidator called twice`);
    this.validator = v;
    return this;
  }

  /** Serves this kind's conversion on `/convert` (conversion.ts: hub and spokes). */
  withConversion(c: Conversion): this {
    if (this.conversion) throw new Error(`${this.gvk.kind}: withConversion called twice`);
    if (!c.hub) throw new Error(`${this.gvk.kind}: conversion needs a hub version`);
    this.conversion = c;
    return this;
  }

  /** The paths `complete()` registers (or registered), sorted. */
  paths(): string[] {
    return [
      ...(this.defaulter ? [mutatePath(this.gvk)] : []),
      ...(this.validator ? [validatePath(this.gvk)] : []),
      ...(this.conversion ? ['/convert'] : []),
    ].sort();
  }

  /** Registers the declared webhooks. Call once. */
  complete(): void {
    if (this.completed) throw new Error(`${this.gvk.kind}: complete called twice`);
    if (!this.defaulter && !this.validator && !this.conversion) {
      throw new Error(`${this.gvk.kind}: a webhook needs withDefaulter, withValidator or withConversion before complete()`);
    }
    this.completed = true;
    if (this.defaulter) this.registrar.register(mutatePath(this.gvk), mutatingHandler(this.defaulter));
    if (this.validator) this.registrar.register(validatePath(this.gvk), validatingHandler(this.validator));
    if (this.conversion) this.registrar.registerConversion(this.gvk.group, this.gvk.kind, this.conversion);
  }
}
