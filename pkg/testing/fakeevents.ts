/**
 * The Event recorders of a FakeClient (`fake.host().recorderFor(component)`): each Event is written into the fake's
 * store AT ONCE, inside `event()`, as a core/v1 Event of the shape EventRecorder (pkg/events/recorder.ts) writes to
 * a real API server — so a unit test reads it with `fake.objects(coreResources.events)` right after its reconcile
 * returned, no flush, no wait.
 *
 * As the real recorder: an object without a name or a type other than Normal/Warning drops the Event; messages are
 * truncated to 1024 characters; a repeat of the same (component, object, type, reason, message) is correlated into
 * the first Event (count + 1, lastTimestamp moved, merge-patched), re-created with its count when it was deleted;
 * `event()` never throws (a write the fake refuses, e.g. in a namespace that does not exist, drops the Event).
 * Unlike it: no spam filter and no correlation window (a test never records 25 Events a second for 10 minutes), and
 * timestamps come from the fake's clock (its `now` option).
 *
 * One FakeEvents per FakeClient: every recorder it hands out shares the correlation, as one manager's recorders
 * share its EventBroadcaster. Single event loop: nothing to lock.
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { coreResources } from '../apimachinery/resource.ts';
import type { RequestOptions, Verb } from '../client/request.ts';
import { isNotFound } from '../client/errors.ts';
import {
  eventTimestamp, newCoreEvent, objectReference, truncateMessage, type CoreEvent, type EventType, type ObjectReference, type Recorder,
} from '../events/recorder.ts';

/** What FakeEvents needs of the fake: its synchronous request interface and clock. */
export interface SyncServer {
  /** Answers a request at once (or throws the ApiError), as FakeClient.serve does. */
  serve(method: Verb, path: string, opts?: RequestOptions): unknown;
}

/** The recorders of one FakeClient; see the file comment. */
export class FakeEvents {
  private readonly server: SyncServer;
  private readonly now: () => number;
  /** Correlation key → the Event written for it (count, lastTimestamp kept current here). */
  private readonly correlated = new Map<string, CoreEvent>();
  private seq = 0;

  /** `server`: where Events are written; `now`: the clock of their timestamps and names. */
  constructor(server: SyncServer, now: () => number) {
    this.server = server;
    this.now = now;
  }

  /** A Recorder whose Events carry `component` as source.component and reportingComponent. */
  recorderFor(component: string): Recorder {
    return { event: (obj, type, reason, message) => this.record(component, obj, type, reason, message) };
  }

  private record(component: string, obj: KubeObject | ObjectReference, type: EventType, reason: string, message: string): void {
    if (type !== 'Normal' && type !== 'Warning') return;
    const ref = objectReference(obj);
    if (!ref.name) return;
    const msg = truncateMessage(message);
    const key = JSON.stringify([component, ref.apiVersion, ref.kind, ref.namespace, ref.name, ref.uid, type, reason, msg]);
    const ms = this.now();
    const stamp = eventTimestamp(new Date(ms));
    const events = (ns: string): string => `/api/v1/namespaces/${encodeURIComponent(ns)}/${coreResources.events.resource}`;
    try {
      const prior = this.correlated.get(key);
      if (prior) {
        prior.count++;
        prior.lastTimestamp = stamp;
        try {
          this.server.serve('PATCH', `${events(prior.metadata.namespace)}/${encodeURIComponent(prior.metadata.name)}`, {
            body: { count: prior.count, lastTimestamp: stamp, message: msg }, contentType: 'application/merge-patch+json',
          });
          return;
        } catch (err) {
          if (!isNotFound(err)) throw err;
          // Deleted (expired): created again below with the count so far.
        }
        this.server.serve('POST', events(prior.metadata.namespace), { body: prior });
        return;
      }
      const suffix = (BigInt(ms) * 1_000_000n + BigInt(this.seq++ % 1_000_000)).toString(16);
      const event = newCoreEvent({ component, ref, type, reason, message: msg, stamp, suffix });
      this.server.serve('POST', events(event.metadata.namespace), { body: event });
      this.correlated.set(key, event);
    } catch {
      // Never throws into the reconciler, as the real recorder (which logs and drops).
    }
  }
}
