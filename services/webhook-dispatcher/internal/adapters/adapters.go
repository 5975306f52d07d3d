// Package adapters implements the dispatcher's domain ports on PostgreSQL
// (the dispatch schema, through gorm). Row structs and their converters
// live here, so tables can change without touching the rules. The HTTP
// sender and the metrics live in the sub-packages webhookhttp and metrics.
package adapters

// Schema is the PostgreSQL schema the dispatcher owns.
const Schema = "dispatch"
