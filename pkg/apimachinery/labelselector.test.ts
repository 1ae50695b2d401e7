import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { everything, nothing, parseSelector, selectorFromLabelSelector, selectorFromSet } from './labelselector.ts';

describe('parseSelector', () => {
  const labels = { app: 'web', tier: 'front', n: '5' };

  const cases: Array<[string, boolean]> = [
    ['', true],
    ['app=web', true],
    ['app==web', true],
    ['app=db', false],
    ['app!=db', true],
    ['app!=web', false],
    ['missing!=x', true],
    ['app', true],
    ['missing', false],
    ['!missing', true],
    ['!app', false],
    ['app=web,tier=front', true],
    ['app=web,tier=back', false],
    ['app in (web,db)', true],
    ['app in (db, cache)', false],
    ['missing in (x)', false],
    ['app notin (db,cache)', true],
    ['app notin (web)', false],
    ['missing notin (x)', true],
    ['n>3', true],
    ['n<3', false],
    ['app>3', false],
    [' app = web , tier in (front,back) , !missing ', true],
    ['example.com/role=x', false],
  ];
  for (const [sel, want] of cases) {
    it(`${JSON.stringify(sel)} → ${want}`, () => {
      assert.equal(parseSelector(sel).matches(labels), want);
    });
  }

  it('treats undefined labels as no labels', () => {
    assert.equal(parseSelector('!a').matches(undefined), true);
    assert.equal(parseSelector('a').matches(undefined), false);
  });

  it('round-trips through toString', () => {
    const s = parseSelector('a=b,c!=d,e,!f,g in (h,i),j notin (k)');
    assert.equal(s.toString(), 'a=b,c!=d,e,!f,g in (h,i),j notin (k)');
    assert.equal(parseSelector(s.toString()).requirements.length, 6);
  });

  for (const bad of ['a=b=c', 'a in (b', 'a in ()', '=b', 'a b', 'a in (b))']) {
    it(`rejects ${JSON.stringify(bad)}`, () => {
      assert.throws(() => parseSelector(bad));
    });
  }
});

describe('selector helpers', () => {
  it('selectorFromSet requires every label', () => {
    const s = selectorFromSet({ app: 'web', tier: 'front' });
    assert.equal(s.matches({ app: 'web', tier: 'front', x: 'y' }), true);
    assert.equal(s.matches({ app: 'web' }), false);
  });

  it('selectorFromLabelSelector handles matchLabels and matchExpressions', () => {
    const s = selectorFromLabelSelector({
      matchLabels: { app: 'web' },
      matchExpressions: [
        { key: 'tier', operator: 'In', values: ['front', 'back'] },
        { key: 'canary', operator: 'DoesNotExist' },
      ],
    });
    assert.equal(s.matches({ app: 'web', tier: 'front' }), true);
    assert.equal(s.matches({ app: 'web', tier: 'front', canary: '1' }), false);
    assert.throws(() => selectorFromLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Gt' }] }));
    assert.equal(selectorFromLabelSelector({}).empty, true);
  });

  it('everything and nothing', () => {
    assert.equal(everything.matches({}), true);
    assert.equal(nothing.matches({}), false);
  });
});
