/**
 * The API reference (docs/reference/, issue 33 item 7) is generated from the declarations of the public entry points
 * by hack/gen-reference.ts: the checked-in pages must equal a fresh generation (so a changed signature or doc comment
 * cannot leave them stale), and every export of every entry point, and every public member of an exported class or
 * interface, must have a doc comment. No cluster needed.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { checkedIn, collect, generate, undocumented, undocumentedMembers, type EntryPointDoc } from '../hack/gen-reference.ts';

describe('docs/reference (generated API reference)', () => {
  let docs: EntryPointDoc[];
  before(() => { docs = collect(); });

  test('reads every entry point with its sections, kinds and signatures (so the checks below can fail)', () => {
    const specifiers = docs.map((d) => d.entry.specifier);
    assert.deepEqual(specifiers, ['ts-controller-manager', 'ts-controller-manager/testing']);
    const main = docs[0];
    assert.ok(main !== undefined);
    const all = main.sections.flatMap((s) => s.exports);
    assert.ok(all.length >= 200, `ts-controller-manager exports ${all.length} names`);
    // A section comment of pkg/index.ts heads its exports; an `as` rename is documented under its new name.
    const predicates = main.sections.find((s) => s.title.startsWith('Event predicates'));
    assert.ok(predicates?.exports.some((e) => e.name === 'predicateAnd' && e.kind === 'function'));
    const cm = all.find((e) => e.name === 'ControllerManager');
    assert.equal(cm?.kind, 'class');
    assert.match(cm.signature, /^export declare class ControllerManager/);
    assert.doesNotMatch(cm.signature, /\bprivate\b/, 'private members are left out');
    const testing = docs[1]?.sections.flatMap((s) => s.exports) ?? [];
    assert.ok(testing.some((e) => e.name === 'startTestEnv' && e.kind === 'function' && e.doc !== ''));
  });

  test('the checked-in docs/reference equals a fresh generation', () => {
    const fresh = generate(docs);
    const have = checkedIn();
    assert.deepEqual([...have.keys()].sort(), [...fresh.keys()].sort(), 'docs/reference has other pages: run make reference');
    for (const [name, text] of fresh) {
      assert.ok(have.get(name) === text, `docs/reference/${name} is stale: run make reference`);
    }
  });

  test('every export of every entry point has a doc comment', () => {
    const missing = undocumented(docs);
    assert.deepEqual(missing, [], `${missing.length} export(s) without a doc comment (write one in pkg/, then make reference)`);
  });

  test('every public member of an exported class or interface has a doc comment (private ones and parameterless constructors aside)', () => {
    const all = docs.flatMap((d) => d.sections.flatMap((s) => s.exports));
    // The check can fail: members are found (ControllerManager's documented ones are listed on its page).
    assert.ok((all.find((e) => e.name === 'ControllerManager')?.members.length ?? 0) >= 10);
    const missing = undocumentedMembers(docs);
    assert.deepEqual(missing, [], `${missing.length} public member(s) without a doc comment (write one in pkg/, then make reference)`);
  });
});
