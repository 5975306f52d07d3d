// Package docscheck holds the tests that keep the repository's guides
// (docs/) honest: the signature-verification examples in docs/examples are
// run against deliveries signed and sent by the dispatcher's own sender, and
// every link in docs/*.md and README.md must resolve inside the repository.
//
// It lives in the webhook-dispatcher module because the sender and the
// envelope it signs are internal to it.
package docscheck
