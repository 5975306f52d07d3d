// Package http is the gateway's HTTP side: the public Developer API under
// /v1 (and the deprecated /api/v1), which authenticates, rate-limits and
// either answers (/v1/me) or forwards to the owning service over NATS
// (NewPublic); and the operators' admin API served on the gateway's rpc
// "admin" endpoint (NewAdmin). Domain errors become *errs.Error here.
package http
