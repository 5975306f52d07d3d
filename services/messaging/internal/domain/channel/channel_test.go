package channel

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	t.Parallel()
	ws := "0b3e6f0c-7d7e-4f43-9a51-5d8f4c1e2a10"
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		give      NewChannel
		wantField string
		want      func(Channel) bool
	}{
		{"telegram takes its external id from the token", NewChannel{WorkspaceID: ws, Kind: "telegram", Token: " 987:AAH-x "},
			"", func(c Channel) bool { return c.ExternalID == "987" && c.Token == "987:AAH-x" }},
		{"a given external id wins", NewChannel{WorkspaceID: ws, Kind: "telegram", Token: "987:AAH-x", ExternalID: "my_bot.v2-" + strings.Repeat("x", 118)},
			"", func(c Channel) bool { return c.ExternalID == "my_bot.v2-"+strings.Repeat("x", 118) }},
		{"defaults", NewChannel{WorkspaceID: ws, Kind: "webchat"},
			"", func(c Channel) bool {
				return c.AIMode == AIModeAuto && c.Status == StatusActive && c.ID == "id" && c.CreatedAt.Equal(now) &&
					regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(c.Secret)
			}},
		{"a given secret is kept", NewChannel{WorkspaceID: ws, Kind: "messenger", ExternalID: "page1", Token: "EAAG", Secret: "A-b_9-0123456789"},
			"", func(c Channel) bool { return c.Secret == "A-b_9-0123456789" }},
		{"a secret of 16 characters", NewChannel{WorkspaceID: ws, Kind: "webchat", Secret: "0123456789abcdef"},
			"", func(c Channel) bool { return c.Secret == "0123456789abcdef" }},
		{"no secret: one is generated", NewChannel{WorkspaceID: ws, Kind: "webchat"},
			"", func(c Channel) bool { return len(c.Secret) == 64 }},
		{"no workspace", NewChannel{Kind: "webchat"}, "workspace_id", nil},
		{"workspace not a uuid", NewChannel{WorkspaceID: "acme", Kind: "webchat"}, "workspace_id", nil},
		{"no kind", NewChannel{WorkspaceID: ws}, "kind", nil},
		{"unknown kind", NewChannel{WorkspaceID: ws, Kind: "whatsapp"}, "kind", nil},
		{"telegram without token", NewChannel{WorkspaceID: ws, Kind: "telegram", Token: "  "}, "token", nil},
		{"a token without a bot id", NewChannel{WorkspaceID: ws, Kind: "telegram", Token: "demo"}, "token", nil},
		{"a token with a slash", NewChannel{WorkspaceID: ws, Kind: "telegram", Token: "987:AAH/../x"}, "token", nil},
		{"a token with a space", NewChannel{WorkspaceID: ws, Kind: "telegram", Token: "987:AAH x"}, "token", nil},
		{"an external id of 129 characters", NewChannel{WorkspaceID: ws, Kind: "messenger", Token: "EAAG", ExternalID: strings.Repeat("1", 129)}, "external_id", nil},
		{"an external id with a right-to-left override", NewChannel{WorkspaceID: ws, Kind: "telegram", Token: "987:AAH-x", ExternalID: "bot\u202e"}, "external_id", nil},
		{"an external id with a space", NewChannel{WorkspaceID: ws, Kind: "instagram", Token: "EAAG", ExternalID: "178 41"}, "external_id", nil},
		{"messenger without page id", NewChannel{WorkspaceID: ws, Kind: "messenger", Token: "EAAG"}, "external_id", nil},
		{"messenger without token", NewChannel{WorkspaceID: ws, Kind: "messenger", ExternalID: "page1"}, "token", nil},
		{"instagram without account id", NewChannel{WorkspaceID: ws, Kind: "instagram", Token: "EAAG"}, "external_id", nil},
		{"instagram without token", NewChannel{WorkspaceID: ws, Kind: "instagram", ExternalID: "17841"}, "token", nil},
		{"secret outside telegram's alphabet", NewChannel{WorkspaceID: ws, Kind: "webchat", Secret: "a b-0123456789abcdef"}, "secret", nil},
		{"secret of 15 characters", NewChannel{WorkspaceID: ws, Kind: "webchat", Secret: "0123456789abcde"}, "secret", nil},
		{"short telegram secret", NewChannel{WorkspaceID: ws, Kind: "telegram", Token: "1:t", Secret: "s"}, "secret", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := New(tt.give, "id", now)
			if tt.wantField != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantField {
					t.Fatalf("err = %v, want a FieldError on %s", err, tt.wantField)
				}
				return
			}
			if err != nil || !tt.want(got) {
				t.Fatalf("New = %+v, %v", got, err)
			}
		})
	}
}

func TestSecretMatches(t *testing.T) {
	t.Parallel()
	c := Channel{Secret: "s3cret"}
	tests := []struct {
		give string
		want bool
	}{
		{"s3cret", true},
		{"s3cre", false},
		{"s3cret ", false},
		{"S3CRET", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := c.SecretMatches(tt.give); got != tt.want {
			t.Errorf("SecretMatches(%q) = %v", tt.give, got)
		}
	}
	if (Channel{}).SecretMatches("") {
		t.Error("a channel without a secret accepts an empty one")
	}
}

func TestSetAIModeAndForwarding(t *testing.T) {
	t.Parallel()
	c := Channel{AIMode: AIModeAuto}
	if c.ForwardsEvents() || !c.AIAnswers() {
		t.Fatal("auto forwards, or its AI does not answer")
	}
	if err := c.SetAIMode("external"); err != nil || !c.ForwardsEvents() || c.AIAnswers() {
		t.Fatalf("external: %v", err)
	}
	if err := c.SetAIMode("suggest"); err != nil || c.ForwardsEvents() || !c.AIAnswers() {
		t.Fatalf("suggest: %v", err)
	}
	if err := c.SetAIMode("EXTERNAL"); err == nil || c.AIMode != AIModeSuggest {
		t.Fatalf("bad mode accepted: %v %s", err, c.AIMode)
	}
}
