/** The kube-apiserver audit log, as the chaos and sharding tests read it (one JSON event per line). */
import { readFileSync } from 'node:fs';

export interface AuditEvent {
  stage?: string;
  verb: string;
  userAgent?: string;
  /** The authenticated user; for a ServiceAccount token `extra['authentication.kubernetes.io/credential-id']` is `["JTI=<jti>"]`. */
  user?: { username?: string; extra?: Record<string, string[]> };
  objectRef?: { apiGroup?: string; resource?: string; subresource?: string; namespace?: string; name?: string };
  /** The request's path and query (for a non-resource request, the only thing it names). */
  requestURI?: string;
  /** The answer (for a refusal also its reason and message, at every level). */
  responseStatus?: { code?: number; reason?: string; message?: string };
  /** With level Request and above. */
  requestObject?: unknown;
  /** With level RequestResponse: the object as written (a Status for a refused write). */
  responseObject?: { kind?: string; metadata?: { resourceVersion?: string } };
  requestReceivedTimestamp: string;
  stageTimestamp: string;
}

export function readAuditLog(path: string): AuditEvent[] {
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEvent);
}

/** RFC 3339 with up to 9 fractional digits → microseconds since the epoch (Date keeps milliseconds only). */
export function micros(ts: string): number {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(ts);
  if (!m) throw new Error(`bad timestamp ${ts}`);
  return Date.parse(`${m[1]}Z`) * 1000 + Number((m[2] ?? '').padEnd(6, '0').slice(0, 6));
}

/** The identity in a User-Agent `ts-controller-manager/<version> (<identity>)`, '' if none. */
export function identityOf(e: AuditEvent): string {
  return /\(([^)]+)\)$/.exec(e.userAgent ?? '')?.[1] ?? '';
}

/** 2xx answer. */
export function succeeded(e: AuditEvent): boolean {
  const code = e.responseStatus?.code ?? 0;
  return code >= 200 && code < 300;
}

/** The object a write addressed, subresource left out (a status patch and a spec patch address one object). */
export function objectKey(e: AuditEvent): string {
  return `${e.objectRef?.resource ?? ''}/${e.objectRef?.namespace ?? ''}/${e.objectRef?.name ?? ''}`;
}

/**
 * Leadership terms from the successful writes to the Lease `leaseName`: each identity's first one is the start of
 * its term, in order. A term ends where the next one starts.
 */
export function leadershipTerms(events: readonly AuditEvent[], leaseName: string): { identity: string; start: number }[] {
  const starts = new Map<string, number>();
  for (const e of events) {
    if (e.objectRef?.resource !== 'leases' || e.objectRef.name !== leaseName || !succeeded(e)) continue;
    const id = identityOf(e);
    const at = micros(e.requestReceivedTimestamp);
    if (!starts.has(id) || at < (starts.get(id) ?? 0)) starts.set(id, at);
  }
  return [...starts.entries()].map(([identity, start]) => ({ identity, start })).sort((a, b) => a.start - b.start);
}

/**
 * Whether a successful write changed its object, from a RequestResponse-level audit log that holds every write to
 * that object: a write that changes an object answers with a new resourceVersion (a new etcd revision, greater than
 * any the object had), a no-op write answers with the one the object already had. So: changed ⇔ the answer's
 * resourceVersion is greater than every resourceVersion of that object answered by writes that completed before this
 * one was received. Conservative: an answer without a resourceVersion, or an object with no earlier write in the log,
 * counts as changed; a change by someone else racing this write makes a no-op count as changed, never the reverse.
 */
export function changedObject(e: AuditEvent, all: readonly AuditEvent[]): boolean {
  if (!succeeded(e)) return false;
  const rv = Number(e.responseObject?.metadata?.resourceVersion ?? NaN);
  if (!Number.isFinite(rv)) return true;
  const key = objectKey(e);
  const received = micros(e.requestReceivedTimestamp);
  let before = -1;
  for (const o of all) {
    if (o === e || objectKey(o) !== key || micros(o.stageTimestamp) >= received) continue;
    const v = Number(o.responseObject?.metadata?.resourceVersion ?? NaN);
    if (Number.isFinite(v) && v > before) before = v;
  }
  return rv > before;
}
