// Package docscheck holds the tests that keep the repository's guides
// (docs/) honest: the signature-verification examples in docs/examples are
// run against deliveries signed and sent by the dispatcher's own sender;
// every link in docs/*.md and README.md must resolve inside the repository;
// and every document a comment in the code cites, with its heading, must
// exist (docs/README.md "Keeping the guides true").
//
// It lives in the webhook-dispatcher module because the sender and the
// envelope it signs are internal to it.
package docscheck
