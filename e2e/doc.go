// Package e2e holds Parley's end-to-end tests: they build the real binaries,
// start them against the real PostgreSQL, Redis and NATS (each test in its
// own database, key prefix and stream names, see pkg/testenv), and drive
// them the way a developer and a platform would, with fakes only for the
// outside world, from the test kit in pkg/testenv: the Telegram Bot API
// (telegramfake), Meta's Graph API (metafake) and the developer's webhook
// receiver (receiver).
package e2e
