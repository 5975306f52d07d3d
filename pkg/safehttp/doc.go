// Package safehttp reaches URLs that developers choose (webhook receivers,
// flow http nodes) without letting them reach anything else: the platform's
// own services, the cloud metadata endpoint, or the private network the
// services run in.
//
// The guard works at two moments. When a URL is saved, ValidateURL refuses
// anything but https to a public address or name, and CheckResolved refuses
// a name that resolves to a special address, so the developer learns it at
// once. On every connection, DialControl judges the address actually being
// dialed, after DNS resolution, so a name that is rebound to 127.0.0.1 after
// it was saved still gets nowhere. Clients built here never follow a
// redirect (a Location is an answer, not an instruction), never use a proxy
// from the environment (it would dial for us, unguarded), never decompress
// (no gzip bombs) and read bodies only up to a cap.
//
// Options.AllowPrivate (WEBHOOK_ALLOW_PRIVATE_TARGETS) lifts the address and
// https rules, for local development and tests only; the other rules hold.
package safehttp
