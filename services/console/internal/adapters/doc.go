// Package adapters holds the console's stores (operators and sessions in
// PostgreSQL) and its clients of the other services.
package adapters

// Schema is the console's PostgreSQL schema.
const Schema = "console"
