/** Prometheus text exposition, parsed just enough for the endurance bench: samples with their labels. */
import type { Buckets } from './stats.ts';

export interface Sample { name: string; labels: Record<string, string>; value: number }

/** Every sample line of `text` (comments skipped; `+Inf`/`NaN` values as numbers). */
export function parseSamples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const brace = line.indexOf('{');
    const space = line.lastIndexOf(' ');
    if (space < 0) continue;
    const name = brace >= 0 && brace < space ? line.slice(0, brace) : line.slice(0, line.indexOf(' '));
    const labels: Record<string, string> = {};
    if (brace >= 0 && brace < space) {
      const body = line.slice(brace + 1, line.lastIndexOf('}'));
      for (const m of body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1] as string] = (m[2] as string).replace(/\\(.)/g, '$1');
    }
    const raw = line.slice(space + 1);
    out.push({ name, labels, value: raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw) });
  }
  return out;
}

/** Sum of the samples of `name` whose labels include `match`. */
export function sum(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  let total = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) total += s.value;
  }
  return total;
}

/** The cumulative buckets of histogram `name` (summed over the other labels) for samples matching `match`. */
export function histogram(samples: readonly Sample[], name: string, match: Record<string, string> = {}): Buckets {
  const out: Buckets = new Map();
  for (const s of samples) {
    if (s.name !== `${name}_bucket`) continue;
    if (!Object.entries(match).every(([k, v]) => s.labels[k] === v)) continue;
    const le = s.labels['le'] === '+Inf' ? Infinity : Number(s.labels['le']);
    out.set(le, (out.get(le) ?? 0) + s.value);
  }
  return out;
}

/** The distinct values of label `label` among the samples of `name`. */
export function labelValues(samples: readonly Sample[], name: string, label: string): string[] {
  return [...new Set(samples.filter((s) => s.name === name && s.labels[label] !== undefined).map((s) => s.labels[label] as string))];
}
