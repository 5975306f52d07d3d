// Package channel holds a workspace's messaging channels: which platform a
// channel is on, how the platform reaches it (token, secret), and which mode
// (ai_mode) decides whether its customer messages go to the developer's
// webhook or the built-in AI answers them.
package channel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/ids"
)

// Kind is the platform a channel is on; conversations carry it as their
// platform.
type Kind string

// The platforms a channel can be on.
const (
	KindTelegram  Kind = "telegram"
	KindMessenger Kind = "messenger"
	KindInstagram Kind = "instagram"
	KindWebchat   Kind = "webchat"
)

// Kinds lists every platform, in the order error messages name them.
var Kinds = []Kind{KindMessenger, KindInstagram, KindTelegram, KindWebchat}

// ParseKind returns the Kind named s.
func ParseKind(s string) (Kind, bool) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, true
		}
	}
	return "", false
}

// AIMode decides who answers a channel's customers: the built-in AI (auto),
// the AI as suggestions to an operator (suggest), or the developer through
// the webhook and the API (external).
type AIMode string

// The AI modes.
const (
	AIModeAuto     AIMode = "auto"
	AIModeSuggest  AIMode = "suggest"
	AIModeExternal AIMode = "external"
)

// AIModes lists every mode.
var AIModes = []AIMode{AIModeAuto, AIModeSuggest, AIModeExternal}

// ParseAIMode returns the AIMode named s.
func ParseAIMode(s string) (AIMode, bool) {
	for _, m := range AIModes {
		if string(m) == s {
			return m, true
		}
	}
	return "", false
}

// Status is a channel's state. Only active exists so far.
type Status string

// StatusActive is the status of every new channel.
const StatusActive Status = "active"

// Channel is one platform connection of a workspace.
type Channel struct {
	ID          string
	WorkspaceID string
	Kind        Kind
	// ExternalID identifies the channel on the platform (the Telegram bot
	// id, the Facebook page id, ...).
	ExternalID string
	// Token authenticates Parley to the platform (the Telegram bot token).
	// It is never shown back.
	Token string
	// Secret authenticates the platform to Parley (Telegram's
	// X-Telegram-Bot-Api-Secret-Token).
	Secret    string
	AIMode    AIMode
	Status    Status
	CreatedAt time.Time
}

// ForwardsEvents reports whether the channel's customer messages become
// webhook events. The mode alone decides.
func (c Channel) ForwardsEvents() bool { return c.AIMode == AIModeExternal }

// AIAnswers reports whether the built-in AI answers the channel's customer
// messages: it sends its answers (auto) or drafts them for an operator
// (suggest). A conversation handed over to operators is not answered all
// the same (conversation.Conversation.NextTurn).
func (c Channel) AIAnswers() bool { return c.AIMode == AIModeAuto || c.AIMode == AIModeSuggest }

// SecretMatches reports, in constant time, whether got is the channel's
// secret. Hashing first keeps the comparison's duration independent of the
// lengths too.
func (c Channel) SecretMatches(got string) bool {
	if c.Secret == "" {
		return false
	}
	want := sha256.Sum256([]byte(c.Secret))
	have := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(want[:], have[:]) == 1
}

// Errors of the channel store.
var (
	ErrNotFound = errors.New("channel not found")
	// ErrExists is a second channel of the same kind with the same
	// external_id; platforms route to a channel by that id.
	ErrExists = errors.New("channel already exists")
)

// FieldError is invalid input for one field.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Reason }

// NewChannel is what an operator gives to create a channel.
type NewChannel struct {
	WorkspaceID string
	Kind        string
	ExternalID  string
	Token       string
	Secret      string
}

// MinSecretLength is the shortest secret an operator may give a channel.
// The secret is what a platform proves itself with (Telegram's secret
// token) and the key of a webchat channel's visitor tokens: a short one
// could be guessed, and with it visitors impersonated.
const MinSecretLength = 16

// telegramSecret is the alphabet and length Telegram accepts for
// setWebhook's secret_token; a secret outside it could never be configured
// on the bot.
var telegramSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// telegramToken is a bot token as BotFather gives it, the bot's id, a
// colon and its secret part, and captures the id. Anything else could
// never send (it goes into the Bot API's URL path).
var telegramToken = regexp.MustCompile(`^(\d+):[A-Za-z0-9_-]+$`)

// externalIDPattern is what a platform's id of a channel is made of (a
// page's or account's digits, a bot's id or name); an operator's own
// name for it keeps to the same, so that the console shows it as typed.
var externalIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// New validates n and returns the channel to store, in mode auto and status
// active, with a generated secret when none is given.
func New(n NewChannel, id string, now time.Time) (Channel, error) {
	if n.WorkspaceID == "" {
		return Channel{}, &FieldError{"workspace_id", "is required"}
	}
	if !IsID(n.WorkspaceID) {
		return Channel{}, &FieldError{"workspace_id", "must be a workspace id (UUID)"}
	}
	kind, ok := ParseKind(n.Kind)
	if n.Kind == "" {
		return Channel{}, &FieldError{"kind", "is required (one of " + joinKinds() + ")"}
	}
	if !ok {
		return Channel{}, &FieldError{"kind", "must be one of " + joinKinds()}
	}
	c := Channel{
		ID:          id,
		WorkspaceID: strings.ToLower(n.WorkspaceID),
		Kind:        kind,
		ExternalID:  strings.TrimSpace(n.ExternalID),
		Token:       strings.TrimSpace(n.Token),
		Secret:      n.Secret,
		AIMode:      AIModeAuto,
		Status:      StatusActive,
		CreatedAt:   now,
	}
	if kind == KindMessenger || kind == KindInstagram {
		// Meta addresses webhooks to the page (or Instagram account) id and
		// takes sends only with the page's token: without either the
		// channel could never receive or answer.
		if c.ExternalID == "" {
			return Channel{}, &FieldError{"external_id", "is required for a " + string(kind) + " channel (the page or Instagram account id)"}
		}
		if c.Token == "" {
			return Channel{}, &FieldError{"token", "is required for a " + string(kind) + " channel (the page access token)"}
		}
	}
	if kind == KindTelegram {
		if c.Token == "" {
			return Channel{}, &FieldError{"token", "is required for a telegram channel (the bot token)"}
		}
		m := telegramToken.FindStringSubmatch(c.Token)
		if m == nil {
			return Channel{}, &FieldError{"token", "must be a bot token as BotFather gives it: the bot's id, a colon and its secret (123456789:AAH…)"}
		}
		// The bot's id is what identifies the bot on Telegram.
		if c.ExternalID == "" {
			c.ExternalID = m[1]
		}
	}
	if c.ExternalID != "" && !externalIDPattern.MatchString(c.ExternalID) {
		return Channel{}, &FieldError{"external_id", "must be 1 to 128 characters of A-Z, a-z, 0-9, _, . and -"}
	}
	if c.Secret == "" {
		c.Secret = GenerateSecret()
	} else if len(c.Secret) < MinSecretLength || !telegramSecret.MatchString(c.Secret) {
		return Channel{}, &FieldError{"secret", fmt.Sprintf("must be %d to 256 characters of A-Z, a-z, 0-9, _ and - (leave it out to have one generated)", MinSecretLength)}
	}
	return c, nil
}

// SetAIMode changes the mode; it applies from the next customer message.
func (c *Channel) SetAIMode(mode string) error {
	m, ok := ParseAIMode(mode)
	if !ok {
		return &FieldError{"ai_mode", "must be one of auto, suggest, external"}
	}
	c.AIMode = m
	return nil
}

// GenerateSecret returns 256 random bits, hex-encoded: within Telegram's
// secret_token alphabet and length.
func GenerateSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand never fails on supported platforms.
		panic(fmt.Sprintf("random secret: %v", err))
	}
	return hex.EncodeToString(b)
}

func joinKinds() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// IsID reports whether s can be a channel, workspace or conversation id;
// anything else cannot exist and is simply not found.
func IsID(s string) bool { return ids.Valid(s) }

// Store keeps channels.
type Store interface {
	Create(ctx context.Context, c Channel) error
	// Get returns ErrNotFound for an unknown id.
	Get(ctx context.Context, id string) (Channel, error)
	// GetByExternalID returns the channel of kind with that platform id
	// (Meta routes by entry[].id); ErrNotFound when there is none.
	GetByExternalID(ctx context.Context, kind Kind, externalID string) (Channel, error)
	// ListByWorkspace returns a workspace's channels, oldest first.
	ListByWorkspace(ctx context.Context, workspaceID string) ([]Channel, error)
	// Update loads the channel, lets fn change it and saves it, atomically.
	Update(ctx context.Context, id string, fn func(*Channel) error) (Channel, error)
}

// Lookup reads channels where a read may be a little old: a platform's
// every delivery needs its channel, which rarely changes, so ingress need
// not read it from the database each time. How old, and what that delays,
// docs/operations.md says ("Channel changes and ingress").
type Lookup interface {
	// Get is Store.Get, perhaps as it was a moment ago.
	Get(ctx context.Context, id string) (Channel, error)
	// GetByExternalID is Store.GetByExternalID, perhaps as it was a
	// moment ago.
	GetByExternalID(ctx context.Context, kind Kind, externalID string) (Channel, error)
}
