/**
 * The import graph of pkg/: which file imports which, and which room (pkg/<dir>) imports which.
 *
 * An edge is every module specifier TypeScript sees in a file: `import … from`, `import type … from`,
 * `export … from`, `export type … from`, side-effect `import '…'` and dynamic `import('…')` — a type-only or lazy
 * import is still a dependency, so hiding one behind `import type` or `import()` does not break a cycle here.
 * Only relative specifiers that resolve inside pkg/ are edges; npm packages and node: builtins are not.
 *
 * Test files (`*.test.ts`) are left out: nothing imports them, so they sit on no file cycle, and a test may use any
 * room (pkg/testing, fakes) without making the production rooms depend on each other. Files directly in pkg/
 * (pkg/index.ts, the public facade) form the room `.`; it may import every room and no room may import it.
 *
 * Run `node hack/importgraph.ts` to print the room graph and any cycles; pkg/imports.test.ts fails on any cycle.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

/** file (relative to the repo root, '/'-separated) → the pkg files it imports. */
export type FileGraph = Map<string, Set<string>>;
/** room name (the first directory under pkg/, or '.') → the rooms it imports (never itself). */
export type RoomGraph = Map<string, Set<string>>;

/** Every non-test .ts file under `dir`, recursively, as paths relative to `root`. */
function sources(root: string, dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir)).sort()) {
    const rel = `${dir}/${name}`;
    if (statSync(join(root, rel)).isDirectory()) out.push(...sources(root, rel));
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

/** The module specifiers of one source text (static, type-only, re-exports and dynamic imports). */
export function specifiers(text: string): string[] {
  const info = ts.preProcessFile(text, true, true);
  return info.importedFiles.map((f) => f.fileName);
}

/** The file graph of every non-test .ts file under `root`/pkg. */
export function fileGraph(root: string): FileGraph {
  const files = sources(root, 'pkg');
  const known = new Set(files);
  const graph: FileGraph = new Map();
  for (const file of files) {
    const deps = new Set<string>();
    for (const spec of specifiers(readFileSync(join(root, file), 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      let target = relative(root, resolve(root, dirname(file), spec)).split(sep).join('/');
      if (!target.endsWith('.ts')) target = target.replace(/\.js$/, '') + '.ts';
      if (known.has(target)) deps.add(target);
      else if (known.has(target.replace(/\.ts$/, '/index.ts'))) deps.add(target.replace(/\.ts$/, '/index.ts'));
    }
    graph.set(file, deps);
  }
  return graph;
}

/** The room of a pkg file: 'pkg/client/rest.ts' → 'client', 'pkg/index.ts' → '.'. */
export function roomOf(file: string): string {
  const parts = file.split('/');
  return parts.length > 2 ? parts[1]! : '.';
}

/** Collapse a file graph to rooms. */
export function roomGraph(files: FileGraph): RoomGraph {
  const rooms: RoomGraph = new Map();
  for (const [file, deps] of files) {
    const from = roomOf(file);
    const set = rooms.get(from) ?? new Set<string>();
    rooms.set(from, set);
    for (const dep of deps) {
      const to = roomOf(dep);
      if (to !== from) set.add(to);
    }
  }
  return rooms;
}

/**
 * Every strongly connected component with more than one node (or a self-edge), its members sorted: the sets of
 * nodes that all reach each other. Tarjan's algorithm; deterministic.
 */
export function components(graph: Map<string, Set<string>>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const comp: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1 || graph.get(v)?.has(v)) components.push(comp.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return components.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** One cycle path ('a → b → a' as ['a', 'b', 'a']) through each strongly connected component of `graph`. */
export function cycles(graph: Map<string, Set<string>>): string[][] {
  return components(graph).map((comp) => cyclePath(graph, new Set(comp)));
}

/** Human-readable: each component with all its members and one concrete cycle through it. */
export function describeCycles(graph: Map<string, Set<string>>): string[] {
  return components(graph).map((comp) => `{${comp.join(', ')}}: ${cyclePath(graph, new Set(comp)).join(' → ')}`);
}

/** One closed path inside a strongly connected component, found by breadth-first search back to its first node. */
function cyclePath(graph: Map<string, Set<string>>, comp: Set<string>): string[] {
  const start = [...comp].sort()[0]!;
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (!comp.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let u: string | undefined = v; u !== undefined && u !== start; u = prev.get(u)) path.splice(1, 0, u);
        path.push(start);
        return path;
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/** The rooms in dependency order (lowest first), each with the rooms it imports. Assumes no room cycle. */
export function formatRooms(rooms: RoomGraph): string[] {
  const depth = new Map<string, number>();
  const d = (r: string, seen: Set<string>): number => {
    if (depth.has(r)) return depth.get(r)!;
    if (seen.has(r)) return 0;
    seen.add(r);
    const v = Math.max(0, ...[...(rooms.get(r) ?? [])].map((x) => d(x, seen) + 1));
    depth.set(r, v);
    return v;
  };
  const names = [...rooms.keys()].sort((a, b) => d(a, new Set()) - d(b, new Set()) || a.localeCompare(b));
  return names.map((r) => `${r.padEnd(16)} → ${[...(rooms.get(r) ?? [])].sort().join(', ') || '(nothing)'}`);
}

if (import.meta.main) {
  const root = resolve(import.meta.dirname, '..');
  const files = fileGraph(root);
  const rooms = roomGraph(files);
  const roomCycles = describeCycles(rooms);
  const fileCycles = describeCycles(files);
  console.log(`${files.size} files, ${rooms.size} rooms`);
  for (const line of formatRooms(rooms)) console.log(line);
  for (const c of roomCycles) console.log(`room cycle: ${c}`);
  for (const c of fileCycles) console.log(`file cycle: ${c}`);
  if (roomCycles.length + fileCycles.length > 0) process.exitCode = 1;
}
