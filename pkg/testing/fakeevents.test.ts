/**
 * The FakeClient's Event recorder (`fake.host().recorderFor(component)`): Events are stored in the fake at once, as
 * core/v1 Events with the shape EventRecorder writes to a real API server, repeats correlated into one Event.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { coreResources, type KubeObject, type ReconcilerHost } from '../index.ts';
import type { CoreEvent } from '../events/recorder.ts';
import { FakeClient } from './fakeclient.ts';

const guestbook: KubeObject = { apiVersion: 'webapp.example.com/v1', kind: 'Guestbook', metadata: { namespace: 'a', name: 'g', uid: 'u-1', resourceVersion: '7' } };

test('host().recorderFor stores each Event in the fake synchronously, with the shape a real recorder writes', async () => {
  const fake = new FakeClient({ now: () => Date.parse('2026-01-02T03:04:05.678Z') });
  await fake.resource(coreResources.namespaces).create({ metadata: { name: 'a' } });
  const host: ReconcilerHost = fake.host();
  const recorder = host.recorderFor('guestbook-controller');
  recorder.event(guestbook, 'Normal', 'ConfigMapCreated', 'ConfigMap g created');
  // No await between the call and the read: a unit test sees the Event as soon as its reconcile returned.
  const [event, ...rest] = fake.objects<CoreEvent>(coreResources.events);
  assert.deepEqual(rest, []);
  assert.ok(event);
  assert.match(event.metadata.name, /^g\.[0-9a-f]+$/);
  assert.equal(event.metadata.namespace, 'a');
  assert.deepEqual(event.involvedObject, { apiVersion: 'webapp.example.com/v1', kind: 'Guestbook', namespace: 'a', name: 'g', uid: 'u-1', resourceVersion: '7' });
  assert.deepEqual([event.type, event.reason, event.message, event.count], ['Normal', 'ConfigMapCreated', 'ConfigMap g created', 1]);
  assert.deepEqual([event.source, event.reportingComponent], [{ component: 'guestbook-controller' }, 'guestbook-controller']);
  assert.deepEqual([event.firstTimestamp, event.lastTimestamp], ['2026-01-02T03:04:05Z', '2026-01-02T03:04:05Z']);
});

test('a repeat of the same Event raises its count (one Event, as the real correlator); another reason or type is another Event', async () => {
  let now = Date.parse('2026-01-02T03:04:05Z');
  const fake = new FakeClient({ now: () => now });
  await fake.resource(coreResources.namespaces).create({ metadata: { name: 'a' } });
  const recorder = fake.host().recorderFor('guestbook-controller');
  recorder.event(guestbook, 'Normal', 'Reconciled', 'up to date');
  now += 3_000;
  // Another recorder of the same fake and component correlates with the first (one broadcaster per manager).
  fake.host().recorderFor('guestbook-controller').event(guestbook, 'Normal', 'Reconciled', 'up to date');
  recorder.event(guestbook, 'Warning', 'Reconciled', 'up to date');
  recorder.event(guestbook, 'Normal', 'Deleted', 'gone');
  const events = fake.objects<CoreEvent>(coreResources.events).sort((x, y) => x.reason.localeCompare(y.reason) || x.type.localeCompare(y.type));
  assert.deepEqual(events.map((e) => [e.type, e.reason, e.count]), [['Normal', 'Deleted', 1], ['Normal', 'Reconciled', 2], ['Warning', 'Reconciled', 1]]);
  const repeated = events[1];
  assert.deepEqual([repeated?.firstTimestamp, repeated?.lastTimestamp], ['2026-01-02T03:04:05Z', '2026-01-02T03:04:08Z']);
  // Deleted meanwhile (expired): the next repeat creates it again with the count so far, as the real recorder does.
  await fake.resource(coreResources.events).namespace('a').delete(repeated?.metadata.name ?? '');
  recorder.event(guestbook, 'Normal', 'Reconciled', 'up to date');
  assert.deepEqual(fake.objects<CoreEvent>(coreResources.events).filter((e) => e.reason === 'Reconciled' && e.type === 'Normal').map((e) => e.count), [3]);
});

test('never throws: an object without a name, an unknown type or a namespace that does not exist drop the Event', () => {
  const fake = new FakeClient();
  const recorder = fake.host().recorderFor('c');
  recorder.event({ metadata: { namespace: 'a' } }, 'Normal', 'R', 'no name');
  recorder.event(guestbook, 'Error' as 'Normal', 'R', 'bad type');
  recorder.event(guestbook, 'Normal', 'R', 'namespace a does not exist');
  assert.deepEqual(fake.objects(coreResources.events), []);
});

test('a long message is truncated to 1024 characters, as the real recorder does', async () => {
  const fake = new FakeClient();
  await fake.resource(coreResources.namespaces).create({ metadata: { name: 'a' } });
  fake.host().recorderFor('c').event(guestbook, 'Warning', 'Long', 'x'.repeat(2000));
  const [event] = fake.objects<CoreEvent>(coreResources.events);
  assert.equal(event?.message.length, 1024);
  assert.match(event?.message ?? '', /\.\.\.$/);
});
