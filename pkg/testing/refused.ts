/**
 * Refusals of the manager under test, process-wide: where `startTestEnv({ rbacPaths })` reports each request RBAC
 * refused to its ServiceAccount (rbac.ts), and where `eventually` and `startManager` look so a test stops at the first
 * one — whatever it was waiting for cannot happen without the missing permission, so waiting out a timeout would only
 * hide the cause.
 *
 * Invariants: a source is watched from the environment's start to its stop; `pendingRefusal()` is the first refusal
 * of any watched source (in the order the sources started), until that source's refusals are cleared.
 */
import { refusalMessage, type Refusal } from '../rbac/refusal.ts';

/** The manager under test was refused by RBAC: `refusal` says what, the message which rule to add and where. */
export class RbacRefusalError extends Error {
  /** What was refused: the user, verb, group, resource, namespace, request and the API server's message. */
  readonly refusal: Refusal;

  /** `role`: the role files the ServiceAccount is bound by, as the message names them (e.g. "config/rbac"). */
  constructor(refusal: Refusal, role: string) {
    super(refusalMessage(refusal, role));
    this.name = 'RbacRefusalError';
    this.refusal = refusal;
  }
}

/** Something that records refusals (an environment's ServiceAccount connection). */
export interface RefusalSource {
  /** Refused requests so far, first first. */
  readonly refusals: readonly Refusal[];
  /** The role files the ServiceAccount is bound by, as the message names them. */
  readonly role: string;
}

const sources = new Set<RefusalSource>();

/** Starts watching `source` (until `unwatchRefusals`). */
export function watchRefusals(source: RefusalSource): void {
  sources.add(source);
}

/** Stops watching `source`. */
export function unwatchRefusals(source: RefusalSource): void {
  sources.delete(source);
}

/** The first refusal of any watched source, as the error a waiting test fails with; undefined when there is none. */
export function pendingRefusal(): RbacRefusalError | undefined {
  for (const s of sources) {
    const [first] = s.refusals;
    if (first) return new RbacRefusalError(first, s.role);
  }
  return undefined;
}
