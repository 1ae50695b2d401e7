/**
 * The arithmetic of the endurance bench (bench/soak.ts), pure and tested in test/soak.test.ts: growth rates from
 * noisy memory samples, quantiles from Prometheus histogram buckets, and cumulative counters across process restarts.
 */

/** Least-squares slope of y over x (units of y per unit of x); undefined with fewer than 2 distinct x. */
export function slope(points: readonly (readonly [number, number])[]): number | undefined {
  const n = points.length;
  if (n < 2) return undefined;
  let sx = 0;
  let sy = 0;
  for (const [x, y] of points) {
    sx += x;
    sy += y;
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? undefined : num / den;
}

/**
 * The floor of a noisy series: the minimum of each window of `windowMs` (by x), at the window's middle. A heap or RSS
 * that only grows between garbage collections has a level floor; a leak raises the floor. Windows with no point are
 * skipped.
 */
export function windowFloors(points: readonly (readonly [number, number])[], windowMs: number): [number, number][] {
  if (points.length === 0) return [];
  const start = points[0]?.[0] ?? 0;
  const floors = new Map<number, number>();
  for (const [x, y] of points) {
    const w = Math.floor((x - start) / windowMs);
    const cur = floors.get(w);
    if (cur === undefined || y < cur) floors.set(w, y);
  }
  return [...floors].sort((a, b) => a[0] - b[0]).map(([w, y]) => [start + (w + 0.5) * windowMs, y]);
}

/** Median of numbers (undefined when empty). */
export function median(xs: readonly number[]): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** Cumulative histogram buckets: upper bound (Infinity for +Inf) → count of observations ≤ it. */
export type Buckets = Map<number, number>;

/**
 * The q-quantile of cumulative buckets, interpolated linearly inside the bucket it falls in (Prometheus's
 * histogram_quantile): undefined without observations; the highest finite bound when it falls in +Inf.
 */
export function bucketQuantile(q: number, buckets: Buckets): number | undefined {
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  const total = buckets.get(Infinity) ?? (bounds.length ? buckets.get(bounds[bounds.length - 1] as number) : 0) ?? 0;
  if (!total) return undefined;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (const b of bounds) {
    const c = buckets.get(b) ?? 0;
    if (c >= rank) {
      if (b === Infinity) return prevBound;
      if (c === prevCount) return b;
      return prevBound + ((b - prevBound) * (rank - prevCount)) / (c - prevCount);
    }
    prevBound = b;
    prevCount = c;
  }
  return prevBound;
}

/** `a - b` per bound (the observations between two scrapes of one process). */
export function bucketDelta(a: Buckets, b: Buckets | undefined): Buckets {
  const out: Buckets = new Map();
  for (const [k, v] of a) out.set(k, v - (b?.get(k) ?? 0));
  return out;
}

/** Adds `b` into `a` per bound. */
export function addBuckets(a: Buckets, b: Buckets): void {
  for (const [k, v] of b) a.set(k, (a.get(k) ?? 0) + v);
}

/**
 * A counter read from processes that restart: each reading of one process adds what it grew since that process's
 * previous reading; a process's first reading adds everything it counted (it started from zero).
 */
export class RestartingCounter {
  private readonly last = new Map<string, number>();
  total = 0;

  /** The reading `value` of process `incarnation`; returns what it added. */
  observe(incarnation: string, value: number): number {
    const prev = this.last.get(incarnation) ?? 0;
    const add = value >= prev ? value - prev : value; // a drop: the counter was reset (never expected within one process)
    this.last.set(incarnation, value);
    this.total += add;
    return add;
  }
}
