package gateway

// NewAPIKey is POST /admin/workspaces/:id/api-keys; the body is optional.
// An empty Key makes a new random key; a given key (parleyctl demo's fixed
// local key) makes the call a repeatable one: the same key for the same
// workspace answers the key's id again (200 instead of 201).
type NewAPIKey struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
}

// CreatedAPIKey is a new key with its plaintext, which is shown this once.
type CreatedAPIKey struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// APIKey is a key as the operators' list shows it: never the key or its
// hash, only the prefix that tells keys apart. LastUsedAt is when it last
// authenticated a request, to within a minute (null: never); RevokedAt is
// null while the key is active.
type APIKey struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Prefix     string  `json:"prefix"`
	CreatedAt  string  `json:"created_at"`
	LastUsedAt *string `json:"last_used_at"`
	RevokedAt  *string `json:"revoked_at"`
}

// APIKeyList is GET /admin/workspaces/:id/api-keys: the workspace's keys,
// revoked ones included, oldest first.
type APIKeyList struct {
	APIKeys []APIKey `json:"api_keys"`
}

// RevokedAPIKey is DELETE /admin/api-keys/:id: the key and when it was
// first revoked.
type RevokedAPIKey struct {
	ID        string `json:"id"`
	RevokedAt string `json:"revoked_at"`
}
