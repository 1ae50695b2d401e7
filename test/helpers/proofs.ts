/**
 * Proof references: how README.md and docs/*.md name the test that would fail if a claim were false (issue 41), and
 * how test/docs-claims.test.ts checks them. No cluster needed.
 *
 * A reference is a test file in a code span (or a link whose text is one) followed by one or more titles in curly
 * quotes, each after a `›`:
 *
 *     `test/fencing.test.ts` › “a stale status patch gets 409 …”
 *     [`pkg/x/y.test.ts`](../pkg/x/y.test.ts) › “describe title” › “test title”
 *
 * The last title is the exact title of a `test(`/`it(` (or `describe(`/`suite(`) call in that file; titles before it
 * name calls that enclose it, outermost first (to pick one of two tests of the same name). Curly quotes because test
 * titles contain straight ones; no test title may contain “ or ”. A title built from a template string
 * (`` test(`${kind}: …`) ``) matches a reference that fills each `${…}` with some text (possibly none); a title that is
 * a variable or a concatenation cannot be named (name its enclosing `describe` instead).
 *
 * In the documents a claim carries its proof as a GitHub footnote: `… answers 409.[^fence]` and, at the end of the
 * document, `[^fence]: `test/fencing.test.ts` › “…”` (several references separated by `;`, optional words after).
 * Every footnote of a checked document is a proof: it holds at least one reference, is used, and every footnote used
 * is defined.
 *
 * A referenced test is *skipped* if it or a call enclosing it is `.skip`/`.todo`, has a `skip`/`todo` option other
 * than `false`, or its callback calls `<context>.skip(`/`.todo(`. The one exception is a skip gated by the project's
 * weakening switch (`weakenedNote(…)`, test/helpers/weakening.ts: refused under CI, announced otherwise).
 */
import ts from 'typescript';

/** One `` `file` › “title” … `` of a document. */
export interface ProofRef {
  /** Repo-relative path of the test file, as written. */
  file: string;
  /** Titles, outermost first; the last is the test (or describe) that proves the claim. */
  titles: string[];
  /** 1-based line in the document. */
  line: number;
}

/** A `test(`, `it(`, `describe(`, `suite(` or `t.test(` call of a test file. */
export interface TestCall {
  /** `test`, `it`, `describe` or `suite`. */
  fn: string;
  /** The title as written: the literal text, or the template with `${…}` for each substitution. */
  title: string | undefined;
  /** Matches a title that names this call (exact text; each `${…}` of a template stands for any text). */
  matches: (title: string) => boolean;
  /** Why the call (or one enclosing it) is skipped, if it is. */
  skipped: string | undefined;
  /** Titles of the titled calls enclosing it, outermost first. */
  enclosing: string[];
  /** Matchers of the enclosing calls, outermost first (parallel to `enclosing`). */
  enclosingMatches: Array<(title: string) => boolean>;
  line: number;
}

/** The text with fenced code blocks blanked line by line (so line numbers stay), leaving inline code spans. */
function withoutFences(markdown: string): string {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === undefined) {
      if (m?.[1] !== undefined) { fence = m[1]; return ''; }
      return line;
    }
    if (m?.[1] !== undefined && m[1][0] === fence[0] && m[1].length >= fence.length) fence = undefined;
    return '';
  }).join('\n');
}

const lineAt = (text: string, index: number): number => text.slice(0, index).split('\n').length;

const PATH = String.raw`(?:\[\x60([^\x60\]]+)\x60\]\([^)\s]*\)|\x60([^\x60]+)\x60)`;
const REFERENCE = new RegExp(`${PATH}((?:\\s*›\\s*“[^”“\n]*”)+)`, 'g');
/** A test file followed by `›` and something other than a curly-quoted title: a reference gone wrong. */
const NEAR_MISS = new RegExp(`${PATH}\\s*›(?!\\s*“)`, 'g');

/**
 * The references and footnote problems of one document. `problems` lists malformed references (a `›` without a
 * curly-quoted title), footnotes used but not defined, defined but not used, defined twice, or holding no reference.
 */
export function parseProofs(markdown: string): { refs: ProofRef[]; footnotes: number; problems: string[] } {
  const text = withoutFences(markdown);
  const refs: ProofRef[] = [];
  const problems: string[] = [];
  for (const m of text.matchAll(REFERENCE)) {
    const file = m[1] ?? m[2] ?? '';
    const titles = [...(m[3] ?? '').matchAll(/“([^”“]*)”/g)].map((t) => t[1] ?? '');
    refs.push({ file, titles, line: lineAt(text, m.index) });
  }
  for (const m of text.matchAll(NEAR_MISS)) {
    problems.push(`line ${lineAt(text, m.index)}: "${m[0]}…" is not followed by a title in curly quotes “…”`);
  }
  // Footnotes: `[^id]: …` at the start of a line defines (its continuation lines are indented), `[^id]` elsewhere uses.
  // Inline code spans are blanked for this (a footnote written in code is an example, not a footnote).
  const noCode = text.replace(/`[^`\n]*`/g, (m) => ' '.repeat(m.length)).replace(/^\[\^[^\]\s]+\]:/gm, (m) => ' '.repeat(m.length));
  const defined = new Map<string, { line: number; body: string }>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const d = /^\[\^([^\]\s]+)\]:\s*(.*)$/.exec(lines[i] ?? '');
    if (d === null) continue;
    const line = i + 1;
    let body = d[2] ?? '';
    while (i + 1 < lines.length && /^ {2,}\S/.test(lines[i + 1] ?? '')) body += ` ${(lines[++i] ?? '').trim()}`;
    const id = d[1] ?? '';
    if (defined.has(id)) problems.push(`line ${line}: footnote [^${id}] is defined twice`);
    defined.set(id, { line, body });
  }
  const used = new Set<string>();
  for (const m of noCode.matchAll(/\[\^([^\]\s]+)\]/g)) {
    const id = m[1] ?? '';
    used.add(id);
    if (!defined.has(id)) problems.push(`line ${lineAt(text, m.index)}: footnote [^${id}] is used but not defined`);
  }
  for (const [id, { line, body }] of defined) {
    if (!used.has(id)) problems.push(`line ${line}: footnote [^${id}] is defined but not used`);
    if ([...body.matchAll(REFERENCE)].length === 0) problems.push(`line ${line}: footnote [^${id}] names no test (\`file\` › “title”)`);
  }
  return { refs, footnotes: defined.size, problems };
}

const TEST_FUNCTIONS = new Set(['test', 'it', 'describe', 'suite']);
const SKIP_MODIFIERS = new Set(['skip', 'todo']);

/**
 * `test`, `it.skip`, `t.test`, `describe.only`, …: the call's test function and its modifier, or undefined. `x.test(…)`
 * is a subtest only with a literal title (`re.test(s)` is a RegExp).
 */
function testCallee(call: ts.CallExpression): { name: string; modifier?: string } | undefined {
  const expr = call.expression;
  if (ts.isIdentifier(expr)) return TEST_FUNCTIONS.has(expr.text) ? { name: expr.text } : undefined;
  if (ts.isPropertyAccessExpression(expr)) {
    const left = expr.expression;
    if (ts.isIdentifier(left) && TEST_FUNCTIONS.has(left.text)) return { name: left.text, modifier: expr.name.text };
    const first = call.arguments[0];
    if (expr.name.text === 'test' && first !== undefined && titleOf(first) !== undefined) return { name: 'test' };
  }
  return undefined;
}

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The title node's text and matcher; undefined for a title that is neither a literal nor a template. */
function titleOf(node: ts.Expression | undefined): { title: string; matches: (t: string) => boolean } | undefined {
  if (node === undefined) return undefined;
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
    const title = node.text;
    return { title, matches: (t) => t === title };
  }
  if (ts.isTemplateExpression(node)) {
    const parts = [node.head.text, ...node.templateSpans.map((s) => s.literal.text)];
    const re = new RegExp(`^${parts.map(escapeRe).join('.*?')}$`, 's');
    return { title: parts.join('${…}'), matches: (t) => re.test(t) };
  }
  return undefined;
}

/** Why this call itself is skipped (modifier, option or a context `.skip(` call), or undefined. */
function ownSkip(call: ts.CallExpression, modifier: string | undefined, source: ts.SourceFile): string | undefined {
  if (modifier !== undefined && SKIP_MODIFIERS.has(modifier)) return `.${modifier}`;
  for (const arg of call.arguments.slice(1)) {
    if (ts.isObjectLiteralExpression(arg)) {
      for (const p of arg.properties) {
        if (!ts.isPropertyAssignment(p) || !ts.isIdentifier(p.name) || !SKIP_MODIFIERS.has(p.name.text)) continue;
        if (p.initializer.kind === ts.SyntaxKind.FalseKeyword) continue;
        const value = p.initializer.getText(source);
        if (/\bweakenedNote\(/.test(value)) continue; // the weakening switch: refused under CI (test/weakening.test.ts)
        return `{ ${p.name.text}: ${value} }`;
      }
    }
    if (ts.isArrowFunction(arg) || ts.isFunctionExpression(arg)) {
      const ctx = arg.parameters[0]?.name;
      if (ctx === undefined || !ts.isIdentifier(ctx)) continue;
      let found: string | undefined;
      const visit = (n: ts.Node): void => {
        if (found !== undefined) return;
        if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression) && ts.isIdentifier(n.expression.expression) &&
          n.expression.expression.text === ctx.text && SKIP_MODIFIERS.has(n.expression.name.text)) {
          found = `${ctx.text}.${n.expression.name.text}(…) in its body`;
          return;
        }
        ts.forEachChild(n, visit);
      };
      visit(arg.body);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** Every test call of a TypeScript test file, with its enclosing titles and whether it is skipped. */
export function testCalls(source: string, fileName = 'x.test.ts'): TestCall[] {
  const sf = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: TestCall[] = [];
  interface Frame { title: string; matches: (t: string) => boolean; skipped: string | undefined }
  const visit = (node: ts.Node, stack: Frame[]): void => {
    if (ts.isCallExpression(node)) {
      const callee = testCallee(node);
      if (callee !== undefined) {
        const t = titleOf(node.arguments[0]);
        const own = ownSkip(node, callee.modifier, sf);
        const inherited = stack.find((f) => f.skipped !== undefined);
        const skipped = own ?? (inherited ? `inside "${inherited.title}" (${inherited.skipped})` : undefined);
        out.push({
          fn: callee.name, title: t?.title, matches: t?.matches ?? (() => false), skipped,
          enclosing: stack.map((f) => f.title), enclosingMatches: stack.map((f) => f.matches),
          line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1,
        });
        const frame: Frame = { title: t?.title ?? '(no literal title)', matches: t?.matches ?? (() => false), skipped: own };
        for (const a of node.arguments) visit(a, [...stack, frame]);
        return;
      }
    }
    ts.forEachChild(node, (n) => visit(n, stack));
  };
  visit(sf, []);
  return out;
}

/** The test calls a reference names: the last title matched, the others matched by enclosing calls in order. */
export function resolve(ref: ProofRef, calls: TestCall[]): TestCall[] {
  const last = ref.titles.at(-1) ?? '';
  const outer = ref.titles.slice(0, -1);
  return calls.filter((c) => {
    if (!c.matches(last)) return false;
    let i = 0;
    for (const m of c.enclosingMatches) if (i < outer.length && m(outer[i] ?? '')) i++;
    return i === outer.length;
  });
}

/** What is wrong with a reference given the file's source (undefined: the file does not exist); undefined if fine. */
export function checkRef(ref: ProofRef, source: string | undefined): string | undefined {
  if (!/\.(?:test|e2e)\.ts$/.test(ref.file)) return `${ref.file} is not a test file (*.test.ts or *.e2e.ts)`;
  if (source === undefined) return `${ref.file} does not exist`;
  const found = resolve(ref, testCalls(source, ref.file));
  const named = ref.titles.map((t) => `“${t}”`).join(' › ');
  if (found.length === 0) return `${ref.file} has no test ${named}`;
  const skipped = found.filter((c) => c.skipped !== undefined);
  if (skipped.length > 0) return `${ref.file} › ${named} is skipped: ${skipped.map((c) => `line ${c.line}: ${c.skipped}`).join('; ')}`;
  return undefined;
}
