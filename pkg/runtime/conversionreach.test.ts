/**
 * conversionWebhookUnreachable on kube-apiserver 1.36's own texts: the three seen on a real API server by
 * test/webhook-selfconversion.test.ts (refused, Failure, x509), the watch cache's 429 wrapping, and the others
 * built as webhook_converter.go and k8s.io/apiserver's proxy resolver write them.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { conversionWebhookUnreachable } from './conversionreach.ts';

const prefix = 'GET /apis/webhooktest.example.com/v2/widgets: HTTP 500 Internal Server Error: conversion webhook for webhooktest.example.com/v1, Kind=Widget failed: ';
const cacher = 'GET /apis/webhooktest.example.com/v2/widgets: HTTP 429 TooManyRequests: storage is (re)initializing: failed to list webhooktest.example.com/v2, Kind=Widget: conversion webhook for webhooktest.example.com/v1, Kind=Widget failed: ';
const post = 'Post "https://webhook-service.system.svc:443/convert?timeout=30s": ';

describe('conversionWebhookUnreachable', () => {
  test('nobody answered: connection refused, no route, unreachable network, a dial timeout, no endpoints — also through the watch cache (429)', () => {
    for (const tail of [
      'Post "https://127.0.0.1:34369/convert?timeout=30s": dial tcp 127.0.0.1:34369: connect: connection refused',
      `${post}dial tcp 10.96.0.12:443: connect: connection refused`,
      `${post}dial tcp 10.96.0.12:443: connect: no route to host`,
      `${post}dial tcp 10.96.0.12:443: connect: network is unreachable`,
      `${post}dial tcp 10.96.0.12:443: i/o timeout`,
      `${post}dial tcp [fd00::12]:443: i/o timeout`,
      `${post}no endpoints available for service "webhook-service"`,
    ]) {
      assert.equal(conversionWebhookUnreachable(prefix + tail), true, tail);
      assert.equal(conversionWebhookUnreachable(cacher + tail), true, `429: ${tail}`);
    }
  });

  test('answered or reached: a Failure (whatever its words), x509/TLS, a timeout after connecting, a missing Service, a malformed answer', () => {
    for (const tail of [
      'widget backend: connect ECONNREFUSED 10.0.0.9:443 (connection refused)',
      'dial tcp 10.0.0.9:443: connect: connection refused', // a Failure message without Go's `Post "…":`
      'Post "https://127.0.0.1:34725/convert?timeout=30s": tls: failed to verify certificate: x509: certificate signed by unknown authority',
      `${post}tls: failed to verify certificate: x509: certificate is valid for other.svc, not webhook-service.system.svc`,
      `${post}remote error: tls: bad certificate`,
      `${post}context deadline exceeded`,
      `${post}net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)`,
      `${post}service "webhook-service" not found`,
      `${post}dial tcp 10.96.0.12:443: connect: connection refused; and then something else`,
      'expected response.uid="a", got "b"',
    ]) {
      assert.equal(conversionWebhookUnreachable(prefix + tail), false, tail);
    }
    assert.equal(conversionWebhookUnreachable('conversion webhook for x/v1, Kind=X returned 0 objects, expected 1'), false);
    assert.equal(conversionWebhookUnreachable('GET /apis/x/v1/xs: HTTP 403 Forbidden: dial tcp 1.2.3.4:443: connect: connection refused'), false);
  });
});
