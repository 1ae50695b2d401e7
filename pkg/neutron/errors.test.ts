import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeError, isNotFound, isRetryable, NeutronAuthError, NeutronBadRequestError, NeutronConflictError, NeutronError,
  NeutronForbiddenError, NeutronNotFoundError, NeutronUnavailableError,
} from './errors.ts';

// Bodies as a real neutron-server (Zed) sends them (see /work/shared/notes/neutron.md).
const neutron = (type: string, message: string, detail = ''): string => JSON.stringify({ NeutronError: { type, message, detail } });

describe('decodeError', () => {
  it('maps statuses to typed errors and keeps Neutron type, message and detail', () => {
    const cases: [number, string, new (...a: never[]) => NeutronError][] = [
      [400, 'InvalidInput', NeutronBadRequestError],
      [401, 'HTTPUnauthorized', NeutronAuthError],
      [403, 'PolicyNotAuthorized', NeutronForbiddenError],
      [404, 'NetworkNotFound', NeutronNotFoundError],
      [409, 'NetworkInUse', NeutronConflictError],
      [429, 'OverLimit', NeutronUnavailableError],
      [500, 'HTTPInternalServerError', NeutronUnavailableError],
      [503, 'ServiceUnavailable', NeutronUnavailableError],
    ];
    for (const [status, type, cls] of cases) {
      const e = decodeError(status, neutron(type, `msg ${status}`, `detail ${status}`), { method: 'DELETE', path: '/v2.0/networks/x', requestId: 'req-1' });
      assert.ok(e instanceof cls, `${status} → ${cls.name}, got ${e.name}`);
      assert.ok(e instanceof NeutronError && e instanceof Error);
      assert.equal(e.name, cls.name);
      assert.equal(e.status, status);
      assert.equal(e.type, type);
      assert.equal(e.serverMessage, `msg ${status}`);
      assert.equal(e.detail, `detail ${status}`);
      assert.equal(e.requestId, 'req-1');
      assert.equal(e.message, `DELETE /v2.0/networks/x: HTTP ${status} ${type}: msg ${status}`);
    }
  });

  it('other statuses (412 stale If-Match) are plain NeutronErrors', () => {
    const e = decodeError(412, neutron('RevisionNumberConstraintFailed', 'Constrained to 1, but current revision is 2'));
    assert.equal(e.constructor, NeutronError);
    assert.equal(e.status, 412);
    assert.equal(e.type, 'RevisionNumberConstraintFailed');
  });

  it('decodes the real InvalidInput body for a bad CIDR', () => {
    const e = decodeError(400, neutron('InvalidInput', "Invalid input for cidr. Reason: '10.0.0.0/33' is not a valid IP subnet."));
    assert.ok(e instanceof NeutronBadRequestError);
    assert.match(e.message, /InvalidInput: Invalid input for cidr/);
  });

  it('understands the old string form, Keystone errors, HTML and empty bodies', () => {
    const old = decodeError(404, JSON.stringify({ NeutronError: 'Network x could not be found' }));
    assert.equal(old.type, 'HTTP404');
    assert.equal(old.serverMessage, 'Network x could not be found');

    const ks = decodeError(401, JSON.stringify({ error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } }));
    assert.ok(ks instanceof NeutronAuthError);
    assert.equal(ks.type, 'Unauthorized');
    assert.equal(ks.serverMessage, 'The request you have made requires authentication.');

    const html = decodeError(401, '<html>\n <head>\n  <title>401 Unauthorized</title>\n </head>\n <body><h1>401 Unauthorized</h1>\n This server could not verify</body></html>');
    assert.ok(html instanceof NeutronAuthError);
    assert.equal(html.type, 'HTTP401');
    assert.equal(html.serverMessage, '401 Unauthorized 401 Unauthorized This server could not verify');

    const empty = decodeError(502, '');
    assert.ok(empty instanceof NeutronUnavailableError);
    assert.equal(empty.serverMessage, '(empty body)');

    const long = decodeError(500, 'x'.repeat(10_000));
    assert.equal(long.serverMessage.length, 200);
  });
});

describe('isRetryable', () => {
  it('is true only for unavailability (5xx, 429, transport)', () => {
    for (const s of [0, 429, 500, 502, 503, 504]) assert.equal(isRetryable(decodeError(s, '')), true, `status ${s}`);
    for (const s of [400, 401, 403, 404, 409, 412]) assert.equal(isRetryable(decodeError(s, '')), false, `status ${s}`);
    assert.equal(isRetryable(new NeutronUnavailableError({ status: 0, type: 'Timeout', message: 'no response' })), true);
    assert.equal(isRetryable(new Error('boom')), false);
    assert.equal(isRetryable(new DOMException('aborted', 'AbortError')), false);
    assert.equal(isRetryable(undefined), false);
  });

  it('isNotFound recognises 404s only', () => {
    assert.equal(isNotFound(decodeError(404, neutron('SubnetNotFound', 'x'))), true);
    assert.equal(isNotFound(decodeError(409, '')), false);
  });
});
