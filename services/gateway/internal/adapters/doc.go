// Package adapters implements the gateway's ports: workspaces and API keys
// in PostgreSQL (schema "accounts", through gorm), the accounts change
// token in Redis, and messaging's channel list over the NATS RPC.
package adapters

// Schema is the gateway's PostgreSQL schema.
const Schema = "accounts"
