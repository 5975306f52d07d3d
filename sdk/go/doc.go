// Package parley is the Go client of Parley's Developer API: typed calls
// for every /v1 operation, errors comparable with errors.Is against the
// documented codes, retries that are safe because every send and invoke
// carries an Idempotency-Key, and a flow run's event stream as an iterator.
// The webhook subpackage verifies and decodes the events Parley delivers.
//
// It depends on the standard library only. docs/client.md is its guide.
package parley
