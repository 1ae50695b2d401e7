/**
 * Reference documentation generated from the declarations (`.d.ts`) of the public entry points (issue 33 item 7).
 *
 * The entry points are package.json's "exports": `ts-controller-manager` (pkg/index.ts) and
 * `ts-controller-manager/testing` (pkg/testing/index.ts) get one page each, every export with its kind, its signature
 * exactly as the declaration emit prints it (what a consumer's editor shows from dist/), its doc comment (and its
 * `@param`/`@returns`/… tags) and its documented members; exports are grouped as the entry point groups them (its `//`
 * section comments) and every export and section has an anchor. The built-in types `ts-controller-manager/api/*`
 * (generated from the OpenAPI documents) get one index page of group/versions.
 *
 * How: the entry points are compiled in memory with `declaration: true, emitDeclarationOnly: true` (the options of
 * tsconfig.build.json), then a second program over the emitted `.d.ts` resolves each export to its declarations.
 * Nothing is written to dist/. The output is deterministic (sorted where the source has no order, no dates, no
 * absolute paths), so test/reference.test.ts can compare the checked-in docs/reference/ with a fresh generation.
 *
 *   node hack/gen-reference.ts          # (make reference) rewrite docs/reference/
 *   node hack/gen-reference.ts --check  # exit 1 if docs/reference/ is stale, or an export or a public member of an
 *                                       # exported class or interface has no doc comment
 *   node hack/gen-reference.ts --members  # list the public members without one
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import ts from 'typescript';

const repo = join(import.meta.dirname, '..');
/** Where the pages go, relative to the repository. */
export const referenceDir = 'docs/reference';

/** One public entry point: its import specifier, its source file (relative to the repo) and its page name. */
interface EntryPoint { specifier: string; source: string; page: string; title: string }

const entryPoints: EntryPoint[] = [
  { specifier: 'ts-controller-manager', source: 'pkg/index.ts', page: 'ts-controller-manager.md', title: 'Library' },
  { specifier: 'ts-controller-manager/testing', source: 'pkg/testing/index.ts', page: 'testing.md', title: 'Testing' },
];

/** One documented export of an entry point. */
export interface ExportDoc {
  /** The exported name (an `as` rename's new name). */
  name: string;
  /** class, interface, type, function, const, let, enum, namespace. */
  kind: string;
  /** The declaration(s) as printed from the .d.ts, without comments. */
  signature: string;
  /** The doc comment's text ('' when there is none). */
  doc: string;
  /** Block tags (`@param x …`, `@returns …`), in source order. */
  tags: { name: string; text: string }[];
  /** Documented members of a class or interface: name and the first paragraph of its comment. */
  members: { name: string; doc: string }[];
  /** Public members of a class or interface without a doc comment (`--check` fails on them; not on the pages). */
  undocumentedMembers: string[];
  /** The source file that declares it, relative to the repository ('/'-separated). */
  source: string;
}

/** A section of an entry point: the `//` comment heading a run of exports, and the exports under it. */
export interface Section { title: string; exports: ExportDoc[] }

/** The reference model of one entry point. */
export interface EntryPointDoc { entry: EntryPoint; intro: string; sections: Section[] }

const toPosix = (p: string): string => p.split(sep).join('/');

/** Compiler options of tsconfig.build.json (declarations only, in memory). */
function buildOptions(): ts.CompilerOptions {
  const configPath = join(repo, 'tsconfig.build.json');
  const read = ts.readConfigFile(configPath, (p) => ts.sys.readFile(p));
  if (read.error !== undefined) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, '\n'));
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, repo, undefined, configPath);
  return {
    ...parsed.options, declaration: true, emitDeclarationOnly: true, noEmit: false, sourceMap: false, declarationMap: false,
    removeComments: false, outDir: join(repo, 'dist'), rootDir: repo, incremental: false, composite: false,
  };
}

/** The `.d.ts` of the entry points and everything they reach, by absolute output path. */
function emitDeclarations(options: ts.CompilerOptions): Map<string, string> {
  const program = ts.createProgram(entryPoints.map((e) => join(repo, e.source)), options);
  const out = new Map<string, string>();
  const result = program.emit(undefined, (fileName, text) => { out.set(fileName, text); }, undefined, true);
  const errors = result.diagnostics.filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0) {
    throw new Error(ts.formatDiagnostics(errors, {
      getCanonicalFileName: (f) => f, getCurrentDirectory: () => repo, getNewLine: () => '\n',
    }));
  }
  return out;
}

/** The emitted .d.ts path of a source file under the repository. */
const dtsOf = (source: string): string => join(repo, 'dist', source.replace(/\.ts$/, '.d.ts'));
/** The source file (relative to the repo) of an emitted .d.ts path; a dependency's file as `node_modules/<package>/…`. */
const sourceOf = (dts: string): string => {
  const dep = /(?:^|\/)(node_modules\/.*)$/.exec(toPosix(dts))?.[1];
  if (dep !== undefined) return dep.slice(dep.lastIndexOf('node_modules/'));
  const rel = toPosix(relative(join(repo, 'dist'), dts));
  return rel.startsWith('..') ? toPosix(relative(repo, dts)) : rel.replace(/\.d\.ts$/, '.ts');
};

/** The `//` section comments and export names of an entry point's source, in order (syntax only). */
function sourceSections(sf: ts.SourceFile): { title: string; names: (string | { star: string })[] }[] {
  const sections: { title: string; names: (string | { star: string })[] }[] = [];
  const text = sf.getFullText();
  for (const st of sf.statements) {
    if (!ts.isExportDeclaration(st)) continue;
    const comments = ts.getLeadingCommentRanges(text, st.getFullStart()) ?? [];
    const lines = comments.filter((c) => c.kind === ts.SyntaxKind.SingleLineCommentTrivia)
      .map((c) => text.slice(c.pos + 2, c.end).trim());
    if (lines.length > 0 || sections.length === 0) {
      sections.push({ title: lines.join(' ').replace(/\.$/, '') || 'Exports', names: [] });
    }
    const section = sections.at(-1);
    if (section === undefined) continue;
    if (st.exportClause === undefined) {
      if (st.moduleSpecifier !== undefined && ts.isStringLiteral(st.moduleSpecifier)) {
        section.names.push({ star: st.moduleSpecifier.text });
      }
    } else if (ts.isNamedExports(st.exportClause)) {
      for (const el of st.exportClause.elements) section.names.push(el.name.text);
    }
  }
  return sections;
}

/** The module doc comment of an entry point: the first `/** … *\/` of the file, as Markdown prose. */
function moduleDoc(sf: ts.SourceFile): string {
  const text = sf.getFullText();
  const first = sf.statements[0];
  const ranges = first === undefined ? [] : ts.getLeadingCommentRanges(text, first.getFullStart()) ?? [];
  const block = ranges.find((r) => text.slice(r.pos, r.pos + 3) === '/**');
  if (block === undefined) return '';
  return text.slice(block.pos + 3, block.end - 2).split('\n').map((l) => l.replace(/^\s*\* ?/, '')).join('\n').trim();
}

function kindOf(decl: ts.Declaration): string {
  if (ts.isClassDeclaration(decl)) return 'class';
  if (ts.isInterfaceDeclaration(decl)) return 'interface';
  if (ts.isTypeAliasDeclaration(decl)) return 'type';
  if (ts.isFunctionDeclaration(decl)) return 'function';
  if (ts.isEnumDeclaration(decl)) return 'enum';
  if (ts.isModuleDeclaration(decl)) return 'namespace';
  if (ts.isVariableDeclaration(decl)) {
    return (ts.getCombinedNodeFlags(decl) & ts.NodeFlags.Const) !== 0 ? 'const' : 'let';
  }
  return ts.SyntaxKind[decl.kind];
}

const printer = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed });

/** A class member a consumer cannot use: `private` or `#private` (the declaration emit keeps their names only). */
const isPrivateMember = (m: ts.ClassElement | ts.TypeElement): boolean =>
  (m.name !== undefined && ts.isPrivateIdentifier(m.name)) ||
  (ts.canHaveModifiers(m) && ts.getModifiers(m)?.some((x) => x.kind === ts.SyntaxKind.PrivateKeyword) === true);

/** The statement printed for a declaration (a variable's whole `export declare const …;`), private members left out. */
function printDeclaration(decl: ts.Declaration): string {
  const sf = decl.getSourceFile();
  let node: ts.Node = ts.isVariableDeclaration(decl) ? decl.parent.parent : decl;
  if (ts.isClassDeclaration(decl)) {
    node = ts.factory.updateClassDeclaration(decl, decl.modifiers, decl.name, decl.typeParameters, decl.heritageClauses,
      decl.members.filter((m) => !isPrivateMember(m)));
  }
  return printer.printNode(ts.EmitHint.Unspecified, node, sf);
}

/** The `/** … *\/` comment right before an `export { … }` statement, as text ('' if none). */
function reExportDoc(st: ts.ExportDeclaration): string {
  const text = st.getSourceFile().getFullText();
  const block = (ts.getLeadingCommentRanges(text, st.getFullStart()) ?? []).filter((r) => text.slice(r.pos, r.pos + 3) === '/**').at(-1);
  if (block === undefined) return '';
  return text.slice(block.pos + 3, block.end - 2).split('\n').map((l) => l.replace(/^\s*\* ?/, '')).join('\n').trim();
}

const tagText = (tag: ts.JSDocTagInfo): string => ts.displayPartsToString(tag.text ?? []).trim();

/**
 * Members of a class or interface declaration that have a doc comment (private and #private ones left out), and the
 * names of the public ones that have none (a constructor without parameters and without a comment is not counted).
 */
function members(checker: ts.TypeChecker, decl: ts.Declaration): { documented: { name: string; doc: string }[]; undocumented: string[] } {
  if (!ts.isClassDeclaration(decl) && !ts.isInterfaceDeclaration(decl)) return { documented: [], undocumented: [] };
  const out: { name: string; doc: string }[] = [];
  const seen = new Set<string>();
  const missing = new Set<string>();
  for (const m of decl.members) {
    if (m.name === undefined || isPrivateMember(m)) continue;
    const sym = checker.getSymbolAtLocation(m.name);
    if (sym === undefined) continue;
    // A well-known-symbol member's internal name carries a checker-wide counter (`__@asyncDispose@20091`) that moves
    // with any change to the program: written as its source form, [Symbol.asyncDispose].
    const name = ts.isConstructorDeclaration(m) ? 'constructor' : sym.getName().replace(/^__@(\w+)@\d+$/, '[Symbol.$1]');
    if (seen.has(name)) continue;
    const doc = firstParagraph(ts.displayPartsToString(sym.getDocumentationComment(checker)));
    if (doc === '') { missing.add(name); continue; }
    seen.add(name);
    out.push({ name, doc });
  }
  // Constructors have no name node.
  for (const m of decl.members) {
    if (!ts.isConstructorDeclaration(m) || seen.has('constructor')) continue;
    const sig = checker.getSignatureFromDeclaration(m);
    const doc = sig === undefined ? '' : firstParagraph(ts.displayPartsToString(sig.getDocumentationComment(checker)));
    if (doc !== '') { out.unshift({ name: 'constructor', doc }); seen.add('constructor'); } else if (m.parameters.length > 0) missing.add('constructor');
  }
  return { documented: out, undocumented: [...missing].filter((n) => !seen.has(n)) };
}

const firstParagraph = (s: string): string => (s.trim().split(/\n\s*\n/)[0] ?? '').trim();

/** The reference model of every entry point (reads the repository; deterministic). */
export function collect(): EntryPointDoc[] {
  const options = buildOptions();
  const dts = emitDeclarations(options);
  const host = ts.createCompilerHost({ ...options, noEmit: true });
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.readFile = (f) => dts.get(f) ?? readFile(f);
  host.fileExists = (f) => dts.has(f) || fileExists(f);
  const dirs = new Set([...dts.keys()].flatMap((f) => {
    const out: string[] = [];
    for (let d = dirname(f); d.length >= repo.length; d = dirname(d)) out.push(d);
    return out;
  }));
  const directoryExists = host.directoryExists?.bind(host);
  host.directoryExists = (d) => dirs.has(d) || (directoryExists?.(d) ?? false);
  const roots = entryPoints.map((e) => dtsOf(e.source));
  const program = ts.createProgram(roots, { ...options, noEmit: true, allowImportingTsExtensions: true }, host);
  const checker = program.getTypeChecker();

  const docOf = (name: string, symbol: ts.Symbol): ExportDoc => {
    const target = (symbol.flags & ts.SymbolFlags.Alias) !== 0 ? checker.getAliasedSymbol(symbol) : symbol;
    const decls = (target.declarations ?? []).filter((d) => !ts.isSourceFile(d));
    const first = decls[0];
    if (first === undefined) throw new Error(`export ${name} has no declaration`);
    const signature = decls.map(printDeclaration).join('\n');
    const tags = target.getJsDocTags(checker).map((t) => ({ name: t.name, text: tagText(t) }));
    let doc = ts.displayPartsToString(target.getDocumentationComment(checker)).trim();
    // A dependency's type re-exported as is (`/** … *\/ export type { Logger };`): the re-export's comment documents it.
    for (let s = symbol; doc === '' && (s.flags & ts.SymbolFlags.Alias) !== 0; s = checker.getImmediateAliasedSymbol(s) ?? s) {
      const spec = s.declarations?.find(ts.isExportSpecifier);
      if (spec !== undefined) doc = reExportDoc(spec.parent.parent);
      const next = checker.getImmediateAliasedSymbol(s);
      if (next === undefined || next === s) break;
    }
    return {
      name, kind: [...new Set(decls.map(kindOf))].join(' + '), signature, doc, tags,
      members: decls.flatMap((d) => members(checker, d).documented),
      undocumentedMembers: decls.flatMap((d) => members(checker, d).undocumented), source: sourceOf(first.getSourceFile().fileName),
    };
  };

  return entryPoints.map((entry) => {
    const src = program.getSourceFile(dtsOf(entry.source));
    const original = ts.createSourceFile(entry.source, readFileSync(join(repo, entry.source), 'utf8'), ts.ScriptTarget.Latest, true);
    const moduleSymbol = src === undefined ? undefined : checker.getSymbolAtLocation(src);
    if (src === undefined || moduleSymbol === undefined) throw new Error(`${entry.source}: no declarations emitted`);
    const exports = new Map(checker.getExportsOfModule(moduleSymbol).map((s) => [s.getName(), s]));
    const placed = new Set<string>();
    const sections: Section[] = sourceSections(original).map(({ title, names }) => {
      const docs: ExportDoc[] = [];
      for (const n of names) {
        if (typeof n === 'string') {
          const sym = exports.get(n);
          if (sym === undefined) throw new Error(`${entry.source}: export ${n} not in the declarations`);
          docs.push(docOf(n, sym));
          placed.add(n);
          continue;
        }
        // `export * from './x.ts'`: the module's exports, in declaration order.
        const resolved = ts.resolveModuleName(n.star, src.fileName, program.getCompilerOptions(), host).resolvedModule;
        const starFile = resolved === undefined ? undefined : program.getSourceFile(resolved.resolvedFileName);
        const starSymbol = starFile === undefined ? undefined : checker.getSymbolAtLocation(starFile);
        if (starSymbol === undefined) throw new Error(`${entry.source}: cannot resolve export * from ${n.star}`);
        for (const s of checker.getExportsOfModule(starSymbol)) {
          const name = s.getName();
          if (placed.has(name) || !exports.has(name)) continue;
          docs.push(docOf(name, s));
          placed.add(name);
        }
      }
      return { title, exports: docs };
    });
    const unplaced = [...exports.keys()].filter((n) => !placed.has(n)).sort();
    if (unplaced.length > 0) throw new Error(`${entry.source}: exports not found in any section: ${unplaced.join(', ')}`);
    return { entry, intro: moduleDoc(original), sections };
  });
}

/** Exports without a doc comment, as `specifier: name (source)`. */
export function undocumented(docs: EntryPointDoc[]): string[] {
  return docs.flatMap((d) => d.sections.flatMap((s) => s.exports.filter((e) => e.doc === '')
    .map((e) => `${d.entry.specifier}: ${e.name} (${e.kind}, ${e.source})`)));
}

/** Public members of exported classes and interfaces without a doc comment, as `specifier: Export.member (source)`. */
export function undocumentedMembers(docs: EntryPointDoc[]): string[] {
  return docs.flatMap((d) => d.sections.flatMap((s) => s.exports.flatMap((e) => e.undocumentedMembers
    .map((m) => `${d.entry.specifier}: ${e.name}.${m} (${e.source})`))));
}

/** GitHub's heading anchor (as test/docs-links.test.ts computes it), without duplicate numbering. */
const slug = (heading: string): string => heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').toLowerCase()
  .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');

/**
 * Doc comment text as Markdown. The house style indents examples and diagrams by two or more spaces: a run of such
 * lines that does not continue a list item becomes a fenced code block (common indentation removed). Elsewhere `<`
 * outside code spans is escaped, so a `Map<K, V>` or `/<name>` in prose stays visible.
 */
function prose(text: string): string {
  const out: string[] = [];
  let code: string[] = [];
  let inList = false;
  let fence = false;
  const flush = (): void => {
    if (code.length === 0) return;
    // Blank lines swallowed at the end of a run belong after the block.
    const body = code.slice(0, code.findLastIndex((l) => l.trim() !== '') + 1);
    const indent = Math.min(...body.filter((l) => l.trim() !== '').map((l) => /^ */.exec(l)?.[0].length ?? 0));
    out.push('```', ...body.map((l) => l.slice(indent).trimEnd()), '```', ...code.slice(body.length).map(() => ''));
    code = [];
  };
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) { flush(); fence = !fence; out.push(line); continue; }
    if (fence) { out.push(line); continue; }
    const indented = /^ {2,}\S/.test(line);
    if (indented && !inList) { code.push(line); continue; }
    if (line.trim() === '' && code.length > 0) { code.push(line); continue; }
    flush();
    if (line.trim() === '') inList = false;
    else if (/^\s*(?:[-*] |\d+\. )/.test(line)) inList = true;
    else if (!indented) inList = false;
    out.push(line.split(/(`[^`]*`)/).map((part, i) => (i % 2 === 1 ? part : part.replace(/</g, '&lt;'))).join(''));
  }
  flush();
  return out.join('\n');
}

/** GitHub's anchors in document order: a repeated slug gets `-1`, `-2`, … */
function slugger(): (heading: string) => string {
  const seen = new Map<string, number>();
  return (heading) => {
    const base = slug(heading);
    const n = seen.get(base);
    seen.set(base, (n ?? 0) + 1);
    return n === undefined ? base : `${base}-${n}`;
  };
}

/** Markdown page of one entry point. */
function renderEntry(d: EntryPointDoc): string {
  const out: string[] = [];
  // The anchors of the headings below, computed in the order they appear on the page.
  const next = slugger();
  next(`Reference: ${d.entry.specifier}`);
  next('Contents');
  const anchors = new Map<Section | ExportDoc, string>();
  for (const s of d.sections) {
    anchors.set(s, next(s.title));
    for (const e of s.exports) anchors.set(e, next(e.name));
  }
  const total = d.sections.reduce((n, s) => n + s.exports.length, 0);
  out.push(`# Reference: \`${d.entry.specifier}\``, '');
  out.push(`<!-- Generated by hack/gen-reference.ts from the declarations of ${d.entry.source}; do not edit. Run \`make reference\`. -->`, '');
  if (d.intro !== '') out.push(prose(d.intro), '');
  out.push(`${total} exports. Signatures are the emitted declarations (\`dist/${d.entry.source.replace(/\.ts$/, '.d.ts')}\`). ` +
    'See [the reference index](README.md) for the other entry points.', '');
  out.push('## Contents', '');
  for (const s of d.sections) {
    out.push(`- [${s.title}](#${anchors.get(s) ?? ''}): ${s.exports.map((e) => `[\`${e.name}\`](#${anchors.get(e) ?? ''})`).join(', ')}`);
  }
  out.push('');
  for (const s of d.sections) {
    out.push(`## ${s.title}`, '');
    for (const e of s.exports) {
      out.push(`### ${e.name}`, '');
      const pkg = /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(e.source)?.[1];
      out.push(pkg === undefined
        ? `*${e.kind}* · [\`${e.source}\`](${toPosix(relative(referenceDir, e.source))})`
        : `*${e.kind}* · from the \`${pkg}\` package`, '');
      out.push('```ts', e.signature, '```', '');
      if (e.doc !== '') out.push(prose(e.doc), '');
      const params = e.tags.filter((t) => t.name === 'param');
      if (params.length > 0) {
        out.push('Parameters:', '');
        for (const p of params) {
          const [pname = '', ...rest] = p.text.split(/\s+/);
          out.push(`- \`${pname}\`${rest.length > 0 ? ` — ${prose(rest.join(' ').replace(/^- /, ''))}` : ''}`);
        }
        out.push('');
      }
      for (const t of e.tags.filter((x) => x.name !== 'param')) {
        const label = t.name === 'returns' || t.name === 'return' ? 'Returns' : `@${t.name}`;
        out.push(`${label}: ${prose(t.text)}`, '');
      }
      if (e.members.length > 0) {
        out.push('Members:', '');
        // A member's paragraph is a list item: its further lines (and any code block) indented under it.
        for (const m of e.members) {
          out.push(`- \`${m.name}\` — ${prose(m.doc).split('\n').map((l, i) => (i === 0 || l === '' ? l : `  ${l}`)).join('\n')}`);
        }
        out.push('');
      }
    }
  }
  return `${out.join('\n').replace(/\n+$/, '')}\n`;
}

/** The group/versions of `ts-controller-manager/api/*` (pkg/api/<group>/<version>/zz_generated.types.ts). */
function apiGroupVersions(): { group: string; version: string; file: string; types: number }[] {
  const out: { group: string; version: string; file: string; types: number }[] = [];
  const base = join(repo, 'pkg/api');
  for (const group of readdirSync(base, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort()) {
    for (const version of readdirSync(join(base, group), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort()) {
      const file = `pkg/api/${group}/${version}/zz_generated.types.ts`;
      let text: string;
      try { text = readFileSync(join(repo, file), 'utf8'); } catch { continue; }
      out.push({ group, version, file, types: [...text.matchAll(/^export (?:interface|type) /gm)].length });
    }
  }
  return out;
}

function renderApi(): string {
  const out = ['# Reference: `ts-controller-manager/api/<group>/<version>`', '',
    '<!-- Generated by hack/gen-reference.ts from pkg/api/*/*/zz_generated.types.ts; do not edit. Run `make reference`. -->', '',
    'The built-in Kubernetes types, generated from the pinned kube-apiserver\'s OpenAPI documents (`make openapi`, ' +
    '[docs/codegen.md](../codegen.md)); type-only modules (`import type`). Each group/version is one module; its field ' +
    'comments are the API server\'s own descriptions. The core group is `core`.', '',
    '| Import | Exported types | Source |', '|---|---:|---|'];
  for (const gv of apiGroupVersions()) {
    out.push(`| \`ts-controller-manager/api/${gv.group}/${gv.version}\` | ${gv.types} | [\`${gv.file}\`](${toPosix(relative(referenceDir, gv.file))}) |`);
  }
  return `${out.join('\n')}\n`;
}

function renderIndex(docs: EntryPointDoc[]): string {
  const out = ['# API reference', '',
    '<!-- Generated by hack/gen-reference.ts; do not edit. Run `make reference`. -->', '',
    'Generated from the declarations of the public entry points (package.json "exports"); every export has a doc ' +
    'comment (test/reference.test.ts fails otherwise, and when these pages are stale). For a walk-through see ' +
    '[Writing and testing your own controller](../library.md).', '',
    '| Entry point | Exports | Page |', '|---|---:|---|'];
  for (const d of docs) {
    const n = d.sections.reduce((k, s) => k + s.exports.length, 0);
    out.push(`| \`${d.entry.specifier}\` | ${n} | [${d.entry.title}](${d.entry.page}) |`);
  }
  out.push(`| \`ts-controller-manager/api/<group>/<version>\` | ${apiGroupVersions().length} group/versions | [Built-in types](api.md) |`);
  return `${out.join('\n')}\n`;
}

/** Every page of docs/reference/, by file name, from a fresh generation. */
export function generate(docs: EntryPointDoc[] = collect()): Map<string, string> {
  const pages = new Map<string, string>();
  pages.set('README.md', renderIndex(docs));
  for (const d of docs) pages.set(d.entry.page, renderEntry(d));
  pages.set('api.md', renderApi());
  return pages;
}

/** The pages now checked in under docs/reference/, by file name. */
export function checkedIn(): Map<string, string> {
  const dir = join(repo, referenceDir);
  const pages = new Map<string, string>();
  let names: string[];
  try { names = readdirSync(dir).sort(); } catch { return pages; }
  for (const n of names) pages.set(n, readFileSync(join(dir, n), 'utf8'));
  return pages;
}

if (import.meta.main) {
  const docs = collect();
  const pages = generate(docs);
  if (process.argv.includes('--members')) {
    const missing = undocumentedMembers(docs);
    console.log(`${missing.length} public member(s) of exported classes and interfaces without a doc comment${missing.length > 0 ? ':' : ''}`);
    if (missing.length > 0) console.log(missing.join('\n'));
  } else if (process.argv.includes('--check')) {
    const have = checkedIn();
    const stale = [...new Set([...pages.keys(), ...have.keys()])].filter((n) => pages.get(n) !== have.get(n));
    const missing = undocumented(docs);
    const members = undocumentedMembers(docs);
    if (stale.length > 0) console.error(`docs/reference is stale (${stale.join(', ')}): run make reference`);
    if (missing.length > 0) console.error(`${missing.length} export(s) without a doc comment:\n${missing.join('\n')}`);
    if (members.length > 0) console.error(`${members.length} public member(s) without a doc comment:\n${members.join('\n')}`);
    process.exitCode = stale.length > 0 || missing.length > 0 || members.length > 0 ? 1 : 0;
  } else {
    const dir = join(repo, referenceDir);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    for (const [name, text] of pages) {
      mkdirSync(dirname(join(dir, name)), { recursive: true });
      writeFileSync(join(dir, name), text);
    }
    const missing = undocumented(docs);
    console.log(`wrote ${pages.size} pages to ${referenceDir}/; ${missing.length} export(s) without a doc comment`);
    if (missing.length > 0) console.log(missing.join('\n'));
  }
}
