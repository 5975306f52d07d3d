// Package apicheck holds tests to Parley's OpenAPI document
// (pkg/openapi): what the public API is sent and answers must be what the
// document says, and every route served must be documented.
//
// # Requests and responses
//
// Checker.Transport wraps an http.RoundTripper. Every request to the
// public API (a path under /v1, or under the deprecated /api/v1, which is
// validated against the same operations as /v1) is matched to the
// document's operation and validated before it is sent; its response is
// validated when it arrives. Anything else (probes, admin, ingress, other
// servers) passes through untouched. The caller gets the request's and the
// response's bodies intact; a text/event-stream response is checked for
// its status, headers and content type only, and its stream is left to
// the caller unread.
//
// A mismatch fails the test (t.Errorf) with the method, path, status and
// the validator's reason. The rules:
//
//   - The response is always validated: its status must be one the
//     operation documents (or its default), and its headers and body must
//     match that response. A 404 or 405 for a path or method the document
//     does not have must carry the documented error body.
//   - The request is validated too, but a request mismatch fails the test
//     only when the response is 2xx: the API accepted what the document
//     forbids. When the response is an error, the request is taken as
//     wrong on purpose (a test of a 400, 401 or 413), and only the error
//     response has to be the documented one.
//   - Authentication is checked for presence only: a documented bearer
//     scheme is satisfied by an "Authorization: Bearer <token>" header,
//     whatever the token. A request without one answered 401 is a test of
//     the 401, by the rule above.
//   - A 2xx answer to a path or method the document does not have fails:
//     the route is served but undocumented.
//   - An answer under /api/v1 must carry the Deprecation header.
//
// CheckWebhook validates a delivery a test receiver got (its X-Service-*
// headers and JSON body) against the document's webhook for its event;
// each event's first WebhookChecksPerEvent deliveries are, so that a test
// of thousands of deliveries does not spend its CPU validating them.
//
// # Route coverage
//
// DocumentedRoutes lists the document's operations, EchoRoutes the /v1
// routes an echo instance serves, and CompareRoutes (or CheckRoutes in a
// test) reports the routes served but undocumented and the operations
// documented but not served. Each service's ports/http tests compare its
// routes with the document's operations under its path segments; the
// gateway's test checks that it routes every documented operation to a
// service, or answers it itself.
package apicheck
