package app

import (
	"sync"
	"time"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// Every API request authenticates; its key and workspace are kept in
// process, under the accounts change token read before they were fetched,
// and are used again only while that token is still current (no
// credential has changed since, on any instance) and for at most
// credentialTTL, so that a key's last use is still recorded (FindCredential
// writes it once a LastUsedResolution).
const (
	credentialTTL = 30 * time.Second
	// maxCredentials bounds the cache; when it is full an arbitrary entry
	// makes room.
	maxCredentials = 10_000
)

// credential is an active key and its workspace as FindCredential read
// them.
type credential struct {
	key       account.APIKey
	workspace account.Workspace
	// token is the change token read before the fetch: a change racing the
	// fetch rotates it, so the entry is never used after that change.
	token     string
	fetchedAt time.Time
}

// credentials maps key hashes to what was read for them.
type credentials struct {
	mu sync.Mutex
	m  map[string]credential
}

func newCredentials() *credentials {
	return &credentials{m: make(map[string]credential)}
}

// get returns the entry for hash if it was stored under token, which is
// not "", and is younger than credentialTTL at now.
func (c *credentials) get(hash, token string, now time.Time) (credential, bool) {
	e, ok := c.young(hash, now)
	if !ok || token == "" || e.token != token {
		return credential{}, false
	}
	return e, true
}

// young returns the entry for hash if it is younger than credentialTTL at
// now, whatever token it was stored under.
func (c *credentials) young(hash string, now time.Time) (credential, bool) {
	c.mu.Lock()
	e, ok := c.m[hash]
	c.mu.Unlock()
	if !ok || now.Sub(e.fetchedAt) >= credentialTTL || now.Before(e.fetchedAt) {
		return credential{}, false
	}
	return e, true
}

// admit is the workspace c admits key to: key must be c's and active, and
// the workspace's plan must include the Developer API.
func (c credential) admit(key string) (account.Workspace, error) {
	if !c.key.Matches(key) || !c.key.Active() {
		return account.Workspace{}, account.ErrUnknownKey
	}
	if err := c.workspace.RequireModule(account.ModuleDeveloperAPI); err != nil {
		return account.Workspace{}, err
	}
	return c.workspace, nil
}

// put stores e under hash, replacing what was there.
func (c *credentials) put(hash string, e credential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[hash]; !ok && len(c.m) >= maxCredentials {
		for h := range c.m {
			delete(c.m, h)
			break
		}
	}
	c.m[hash] = e
}
