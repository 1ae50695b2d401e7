import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PriorityError, TerminalError, isPanic, isTerminalError, requeuePriorityOf, withPriority } from './errors.ts';
import { parseRequestKey, requestKey } from './request.ts';

describe('isPanic', () => {
  const cases: [string, unknown, boolean][] = [
    ['string throw', 'boom', true],
    ['undefined throw', undefined, true],
    ['plain object throw', { code: 1 }, true],
    ['TypeError (e.g. property of undefined)', new TypeError("Cannot read properties of undefined (reading 'x')"), true],
    ['ReferenceError', new ReferenceError('x is not defined'), true],
    ['RangeError', new RangeError('Invalid array length'), true],
    ['plain Error', new Error('API said no'), false],
    ['TerminalError', new TerminalError('bad spec'), false],
    ['TypeError with cause (fetch failed)', new TypeError('fetch failed', { cause: new Error('ECONNREFUSED') }), false],
    ['subclass of TypeError', new (class MyTypeError extends TypeError {})('library chose this'), false],
    ['AbortError DOMException', new DOMException('aborted', 'AbortError'), false],
  ];
  for (const [name, err, want] of cases) {
    it(`${name} → ${want ? 'panic' : 'error'}`, () => assert.equal(isPanic(err), want));
  }
});

describe('TerminalError', () => {
  it('is found directly and through the cause chain', () => {
    assert.equal(isTerminalError(new TerminalError('x')), true);
    assert.equal(isTerminalError(new Error('outer', { cause: new Error('mid', { cause: new TerminalError('x') }) })), true);
    assert.equal(isTerminalError(new Error('x')), false);
    assert.equal(isTerminalError('TerminalError'), false);
  });

  it('from() wraps any value and keeps it as cause', () => {
    const inner = new Error('invalid cidr');
    const t = TerminalError.from(inner);
    assert.ok(t instanceof TerminalError);
    assert.equal(t.message, 'invalid cidr');
    assert.equal(t.cause, inner);
    assert.equal(t.name, 'TerminalError');
    assert.equal(TerminalError.from(t), t);
    assert.equal(TerminalError.from('text').message, 'text');
  });
});

describe('request keys', () => {
  it('round-trips namespaced and cluster-scoped requests', () => {
    assert.equal(requestKey({ namespace: 'ns', name: 'a' }), 'ns/a');
    assert.equal(requestKey({ namespace: '', name: 'node-1' }), 'node-1');
    assert.deepEqual(parseRequestKey('ns/a'), { namespace: 'ns', name: 'a' });
    assert.deepEqual(parseRequestKey('node-1'), { namespace: '', name: 'node-1' });
  });

  it('rejects malformed keys', () => {
    for (const bad of ['', 'a/b/c', '/a', 'a/']) assert.throws(() => parseRequestKey(bad), /unexpected key format/, bad);
  });
});

describe('withPriority / requeuePriorityOf', () => {
  it('wraps any thrown value, keeps it as cause and its message; the outermost priority in the cause chain wins', () => {
    const inner = new Error('API unavailable');
    const e = withPriority(inner, -100);
    assert.ok(e instanceof PriorityError);
    assert.equal(e.message, 'API unavailable');
    assert.equal(e.cause, inner);
    assert.equal(withPriority('boom', 5).message, 'boom');
    assert.equal(requeuePriorityOf(e), -100);
    assert.equal(requeuePriorityOf(new Error('outer', { cause: e })), -100);
    assert.equal(requeuePriorityOf(withPriority(e, 7)), 7);
    assert.equal(requeuePriorityOf(inner), undefined);
    assert.equal(requeuePriorityOf('boom'), undefined);
    assert.equal(isPanic(withPriority(new TypeError('x'), 0)), false, 'a deliberate wrapper is an ordinary error');
  });
});
