/**
 * Unit-test fake of Recorder (like client-go's record.FakeRecorder): keeps every event in memory, in order.
 * `events` holds "Type Reason message" strings for easy assertions; `recorded` keeps the full calls.
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { objectReference, type EventType, type ObjectReference, type Recorder } from './recorder.ts';

export interface RecordedEvent {
  ref: ObjectReference;
  type: EventType;
  reason: string;
  message: string;
}

/** A Recorder for unit tests (client-go's record.FakeRecorder): keeps every event in memory, in order. */
export class FakeRecorder implements Recorder {
  /** Every event as `"<type> <reason> <message>"`, in order: for assertions. */
  readonly events: string[] = [];
  /** Every call in full (the object's reference included), in order. */
  readonly recorded: RecordedEvent[] = [];

  /** Records the event in `events` and `recorded`; nothing is written anywhere. */
  event(obj: KubeObject | ObjectReference, type: EventType, reason: string, message: string): void {
    this.events.push(`${type} ${reason} ${message}`);
    this.recorded.push({ ref: objectReference(obj), type, reason, message });
  }
}
