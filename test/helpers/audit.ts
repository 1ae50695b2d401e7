/** The kube-apiserver audit log, as the chaos and sharding tests read it (one JSON event per line). */
import { readFileSync } from 'node:fs';

export interface AuditEvent {
  stage?: string;
  verb: string;
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
  /** With level Request and above. */
  requestObject?: unknown;
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
