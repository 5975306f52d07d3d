package operator_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// TestPasswordRoundTrip: a hash under the real parameters verifies its
// password and no other, is in PHC form with those parameters, and is
// salted (two hashes of one password differ).
func TestPasswordRoundTrip(t *testing.T) {
	t.Parallel()
	h, err := operator.NewHasher(operator.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	const pw = "correct horse battery staple"
	hash, err := h.Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") || len(strings.Split(hash, "$")) != 6 {
		t.Fatalf("hash = %q, want argon2id PHC with m=19456,t=2,p=1", hash)
	}
	if ok, err := h.Verify(pw, hash); err != nil || !ok {
		t.Fatalf("Verify(right) = %v, %v", ok, err)
	}
	for _, wrong := range []string{"", "correct horse battery stapl", "Correct horse battery staple", pw + " "} {
		if ok, err := h.Verify(wrong, hash); err != nil || ok {
			t.Fatalf("Verify(%q) = %v, %v", wrong, ok, err)
		}
	}
	again, _ := h.Hash(pw)
	if again == hash {
		t.Fatal("two hashes of one password are equal: no salt")
	}
}

// TestVerifyUsesTheHashsParameters: a hash made under other parameters
// still verifies after the defaults change, since they travel with it.
func TestVerifyUsesTheHashsParameters(t *testing.T) {
	t.Parallel()
	old, err := operator.NewHasher(operator.Params{Memory: 1024, Time: 1, Threads: 2, SaltLen: 8, KeyLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := old.Hash("a password of some length")
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=1024,t=1,p=2$") {
		t.Fatalf("hash = %q", hash)
	}
	current, _ := operator.NewHasher(operator.Params{Memory: 2048, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})
	if ok, err := current.Verify("a password of some length", hash); err != nil || !ok {
		t.Fatalf("Verify under new defaults = %v, %v", ok, err)
	}
}

func TestVerifyRefusesMalformedHashes(t *testing.T) {
	t.Parallel()
	h, _ := operator.NewHasher(operator.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})
	good, _ := h.Hash("whatever password")
	parts := strings.Split(good, "$")
	tests := []struct{ name, give string }{
		{"empty", ""},
		{"bcrypt", "$2a$10$abcdefghijklmnopqrstuu"},
		{"argon2i", strings.Replace(good, "argon2id", "argon2i", 1)},
		{"other version", strings.Replace(good, "v=19", "v=16", 1)},
		{"zero memory", strings.Replace(good, "m=1024", "m=0", 1)},
		{"no parameters", "$argon2id$v=19$$" + parts[4] + "$" + parts[5]},
		{"salt not base64", "$argon2id$v=19$" + parts[3] + "$!!$" + parts[5]},
		{"no key", "$argon2id$v=19$" + parts[3] + "$" + parts[4] + "$"},
		{"extra field", good + "$x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if ok, err := h.Verify("whatever password", tt.give); err == nil || ok {
				t.Fatalf("Verify(%q) = %v, %v; want ErrMalformedHash", tt.give, ok, err)
			}
		})
	}
}

func TestValidateEmail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		ok   bool
	}{
		{"ann@example.com", true},
		{"Ann.Lee+ops@sub.example.co", true},
		{"", false},
		{"ann", false},
		{"ann@localhost", false},
		{"Ann <ann@example.com>", false},
		{"a@example.com, b@example.com", false},
		{" ann@example.com", false},
		{strings.Repeat("a", 250) + "@example.com", false},
		{"josé@example.com", true},
		{"ann‮gro.elpmaxe@example.com", false}, // a right-to-left override shows another address
		{"ann​@example.com", false},            // a zero-width space hides in the console
	}
	for _, tt := range tests {
		if err := operator.ValidateEmail(tt.give); (err == nil) != tt.ok {
			t.Errorf("ValidateEmail(%q) = %v, want ok %v", tt.give, err, tt.ok)
		}
	}
}

func TestValidatePassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		ok   bool
	}{
		{strings.Repeat("x", 11), false},
		{strings.Repeat("x", 12), true},
		{strings.Repeat("é", 11), false},
		{strings.Repeat("é", 12), true},
		{strings.Repeat("x", 256), true},
		{strings.Repeat("x", 257), false},
	}
	for _, tt := range tests {
		if err := operator.ValidatePassword(tt.give); (err == nil) != tt.ok {
			t.Errorf("ValidatePassword(%d runes) = %v, want ok %v", len([]rune(tt.give)), err, tt.ok)
		}
	}
}

func TestSees(t *testing.T) {
	t.Parallel()
	platform := operator.Operator{}
	scoped := operator.Operator{WorkspaceID: "ws_1"}
	if !platform.Sees("ws_1") || !platform.Sees("ws_2") || !scoped.Sees("ws_1") || scoped.Sees("ws_2") || scoped.Sees("") {
		t.Fatal("Sees breaks the tenancy rule")
	}
}
