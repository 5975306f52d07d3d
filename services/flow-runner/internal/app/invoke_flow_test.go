package app

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseInput(t *testing.T) {
	t.Parallel()
	// sized is an object whose compact encoding is n bytes.
	sized := func(n int) string { return `{"s":"` + strings.Repeat("a", n-8) + `"}` }
	tests := []struct {
		name    string
		give    string
		wantErr string
	}{
		{"empty object", `{}`, ""},
		{"five levels", `{"a": {"b": {"c": {"d": {"e": 1}}}}}`, ""},
		{"five levels with arrays", `{"a": [[[{"e": 1}]]]}`, ""},
		{"16 KB", sized(MaxInputBytes), ""},
		{"16 KB once whitespace is gone", "{ \"s\" :  \"" + strings.Repeat("a", MaxInputBytes-8) + "\"  }", ""},
		{"big numbers stay exact", `{"n": 12345678901234567890}`, ""},
		{"missing", ``, "is required"},
		{"null", `null`, "is required"},
		{"string", `"x"`, "must be an object"},
		{"array", `[1]`, "must be an object"},
		{"number", `1`, "must be an object"},
		{"16 KB and one byte", sized(MaxInputBytes + 1), "over the limit of 16384"},
		{"six levels", `{"a": {"b": {"c": {"d": {"e": {}}}}}}`, "6 levels deep"},
		{"six levels with arrays", `{"a": [[[[[1]]]]]}`, "6 levels deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, err := ParseInput(json.RawMessage(tt.give))
			if tt.wantErr == "" {
				if err != nil || in == nil {
					t.Fatalf("got %v, %v", in, err)
				}
				return
			}
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != "input" || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want an InputError with %q", err, tt.wantErr)
			}
		})
	}
}
