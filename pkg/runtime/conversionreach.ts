/**
 * `conversionWebhookUnreachable(message)`: whether a failed request's message is kube-apiserver saying that NOBODY
 * ANSWERED at a CRD's conversion webhook — the one failure a process serving that conversion may be Ready through
 * (pkg/runtime/manager.ts's `informers` readiness check: it must be Ready to become the Service's endpoint).
 *
 * kube-apiserver's text (k8s.io/apiextensions-apiserver pkg/apiserver/conversion/webhook_converter.go, 1.36): a call
 * that got no answer is `conversion webhook for <group/version, Kind=K> failed: <the client error>`, the client error
 * being Go's `Post "<url>": <transport error>` (net/http's url.Error); a list through the watch cache wraps it as
 * `storage is (re)initializing: failed to list …: <that>` (HTTP 429 instead of 500). Counted as "nobody answers",
 * and only when they make up the whole rest of the message:
 *  - `dial tcp <addr>: connect: connection refused` — nothing listens (a url, or a ClusterIP kube-proxy rejects);
 *  - `dial tcp <addr>: connect: no route to host` / `connect: network is unreachable`;
 *  - `dial tcp <addr>: i/o timeout` — the dial timed out (a ClusterIP with no endpoints and no kube-proxy rule);
 *  - `no endpoints available for service "<name>"` — k8s.io/apiserver pkg/util/proxy ResolveEndpoint, the API
 *    server's endpoint resolver (--enable-aggregator-routing) finding no Ready endpoint.
 * NOT counted, so a process whose cache fails this way stays not Ready: a conversion that answered `Failure` (the
 * message is then the converter's own, e.g. `… failed: widget backend: connect ECONNREFUSED …`, never `Post "…":`),
 * a malformed answer, a TLS or x509 error (`Post "…": tls: failed to verify certificate: x509: …`: the API server
 * reached the process and refused its certificate), `context deadline exceeded` (connected, but no answer in time),
 * `service "…" not found`, and anything else. Residual: a converter whose own Failure message is, word for word, a Go
 * transport error (`Post "…": dial tcp …: connect: connection refused`) cannot be told apart by its text.
 */

/** Go's transport errors for a webhook call that reached nobody (see the file comment). */
const nobodyAnswered = String.raw`(?:dial tcp \S+: (?:connect: (?:connection refused|no route to host|network is unreachable)|i/o timeout)|no endpoints available for service "[^"]+")`;
const unreachable = new RegExp(String.raw`conversion webhook for [^:]+ failed: Post "[^"]+": ${nobodyAnswered}\s*$`);

/** Whether `message` (one request failure's text) says nobody answered at a CRD's conversion webhook. */
export function conversionWebhookUnreachable(message: string): boolean {
  return unreachable.test(message);
}
