// Package account holds the gateway's rules about workspaces, their plans
// and API keys: which modules a plan may carry, how slugs are formed, how an
// API key looks, is generated, hashed and presented, and when a request is
// refused before it reaches any service. It declares the stores it needs and
// knows nothing of HTTP, SQL or Redis.
package account
