// Package adapters holds the console's stores: operators and sessions in
// PostgreSQL, the failed sign-in counts and the reply forms sent in Redis.
package adapters

// Schema is the console's PostgreSQL schema.
const Schema = "console"
