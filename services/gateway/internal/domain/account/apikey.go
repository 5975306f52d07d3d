package account

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// API key format: "pk_" and the base64url encoding (no padding) of 32 random
// bytes, 43 characters. Keys an operator supplies (the demo's fixed local key)
// must still look like keys: the prefix and at least 32 URL-safe characters.
const (
	KeyPrefix          = "pk_"
	keyRandomBytes     = 32
	minKeyBodyLength   = 32
	maxKeyBodyLength   = 128
	displayPrefixChars = 8 // "pk_" and 5 characters: enough to tell keys apart in a list, useless to guess with
	MaxKeyNameLength   = 100
)

// keyQueryParams are query parameters that smell like credentials. A request
// carrying any of them is refused (authentication is by header only).
var keyQueryParams = []string{"api_key", "apikey", "api-key", "key", "access_token", "token"}

// APIKey is a workspace's credential. Only its hash is kept; the plaintext
// is shown once, when it is created.
type APIKey struct {
	ID          string
	WorkspaceID string
	Name        string
	// Hash is the hex SHA-256 of the plaintext key. A fast hash is right
	// here: the key carries 256 random bits, so there is nothing to
	// brute-force, and lookups by hash must be cheap on every request.
	Hash string
	// Prefix is the start of the key, for telling keys apart in a list.
	Prefix    string
	CreatedAt time.Time
	RevokedAt *time.Time
	// LastUsedAt is when the key last authenticated a request, to within
	// LastUsedResolution; nil if it never has.
	LastUsedAt *time.Time
}

// LastUsedResolution is how far behind a key's LastUsedAt may be. An
// authentication records its time only when the stored one is older than
// this, so a busy key costs one write a minute rather than one a request.
const LastUsedResolution = time.Minute

// GenerateKey returns a new plaintext key read from random (crypto/rand.Reader
// in production).
func GenerateKey(random io.Reader) (string, error) {
	b := make([]byte, keyRandomBytes)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("generate api key: %w", err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// ValidateKeyFormat checks that key is "pk_" followed by 32 to 128 URL-safe
// characters (A-Z a-z 0-9 - _).
func ValidateKeyFormat(key string) error {
	body, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok || len(body) < minKeyBodyLength || len(body) > maxKeyBodyLength {
		return invalid("key", "must be %s followed by %d to %d URL-safe characters (A-Z, a-z, 0-9, - and _)", KeyPrefix, minKeyBodyLength, maxKeyBodyLength)
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return invalid("key", "must be %s followed by %d to %d URL-safe characters (A-Z, a-z, 0-9, - and _)", KeyPrefix, minKeyBodyLength, maxKeyBodyLength)
		}
	}
	return nil
}

// HashKey is the stored form of a plaintext key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// NewAPIKey returns the stored form of plaintext for a workspace.
func NewAPIKey(id, workspaceID, name, plaintext string, now time.Time) (APIKey, error) {
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > MaxKeyNameLength {
		return APIKey{}, invalid("name", "must be at most %d characters", MaxKeyNameLength)
	}
	if err := ValidateKeyFormat(plaintext); err != nil {
		return APIKey{}, err
	}
	return APIKey{
		ID:          id,
		WorkspaceID: workspaceID,
		Name:        name,
		Hash:        HashKey(plaintext),
		Prefix:      plaintext[:displayPrefixChars],
		CreatedAt:   now,
	}, nil
}

// Active reports whether the key has not been revoked.
func (k APIKey) Active() bool { return k.RevokedAt == nil }

// Matches reports, in constant time, whether plaintext is this key. The key
// is found by its hash in an index; comparing again here keeps the final
// decision free of timing differences whatever the store does.
func (k APIKey) Matches(plaintext string) bool {
	return subtle.ConstantTimeCompare([]byte(HashKey(plaintext)), []byte(k.Hash)) == 1
}

// Revoke marks the key revoked at now, unless it already is.
func (k *APIKey) Revoke(now time.Time) {
	if k.RevokedAt == nil {
		k.RevokedAt = &now
	}
}

// ParseBearer extracts the token from the Authorization header values of a
// request: exactly one header, scheme Bearer (any case), one token in
// RFC 6750's b64token syntax. A well-formed header may still carry a
// token that is not any key ("Bearer pk_wrong"): that is the caller's
// unknown key, not a malformed header (see IsKeyShaped).
func ParseBearer(values []string) (string, error) {
	if len(values) > 1 {
		return "", ErrMalformedCredentials
	}
	if len(values) == 0 || strings.TrimSpace(values[0]) == "" {
		return "", ErrMissingCredentials
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrMalformedCredentials
	}
	token = strings.TrimSpace(token)
	if !isB64Token(token) {
		return "", ErrMalformedCredentials
	}
	return token, nil
}

// isB64Token reports whether s is RFC 6750's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// IsKeyShaped reports whether token could be an API key at all. One that
// cannot is an unknown key, answered without looking it up.
func IsKeyShaped(token string) bool { return ValidateKeyFormat(token) == nil }

// CheckQuery returns *KeyInQueryError when the raw query string names a
// credential-like parameter, whatever its case or value (even empty).
func CheckQuery(rawQuery string) error {
	if rawQuery == "" {
		return nil
	}
	// ParseQuery keeps what it could parse even when it reports an error,
	// and a malformed pair must not hide a key next to it.
	values, _ := url.ParseQuery(rawQuery)
	for name := range values {
		lower := strings.ToLower(name)
		for _, p := range keyQueryParams {
			if lower == p {
				return &KeyInQueryError{Param: name}
			}
		}
	}
	return nil
}

// KeyStore keeps API keys.
type KeyStore interface {
	// Create stores a new key; ErrKeyExists if its hash is already stored.
	Create(ctx context.Context, k APIKey) error
	// FindByHash returns the key with this hash, revoked or not, or
	// ErrAPIKeyNotFound.
	FindByHash(ctx context.Context, hash string) (APIKey, error)
	// FindCredential returns the key with this hash, revoked or not, and
	// its workspace, read together: every API request authenticates, so
	// this is one round trip, not two. In the same statement it records
	// usedAt as an active key's LastUsedAt when the stored one is missing
	// or older than LastUsedResolution before usedAt; the key returned
	// carries what is stored after that. ErrAPIKeyNotFound if there is no
	// such key (or its workspace has just been deleted).
	FindCredential(ctx context.Context, hash string, usedAt time.Time) (APIKey, Workspace, error)
	// ListByWorkspace returns a workspace's keys, revoked ones included,
	// oldest first.
	ListByWorkspace(ctx context.Context, workspaceID string) ([]APIKey, error)
	// Update loads a key, lets change edit it and saves the result,
	// atomically; ErrAPIKeyNotFound if there is none.
	Update(ctx context.Context, id string, change func(*APIKey) error) (APIKey, error)
}
