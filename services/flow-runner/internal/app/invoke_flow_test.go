package app

import (
	"encoding/json"
	"errors"
	"reflect"
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
		{"a number past int64", `{"n": 12345678901234567890}`, ""},
		{"the largest numbers", `{"max": 1.7976931348623157e308, "min": -1.7976931348623157e308, "tiny": 1e-400}`, ""},
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

// Every number comes out a float64, the numbers of expressions; one no
// float64 holds is refused, naming its field, whatever its place.
func TestParseInputNumbers(t *testing.T) {
	t.Parallel()
	in, err := ParseInput(json.RawMessage(`{"n": 2, "list": [1.5, {"x": -3e2}], "s": "7", "tiny": 1e-400}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": 2.0, "list": []any{1.5, map[string]any{"x": -300.0}}, "s": "7", "tiny": 0.0}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("input = %#v, want %#v", in, want)
	}
	for _, tt := range []struct{ give, field string }{
		{`{"n": 1e400}`, "input.n"},
		{`{"n": -1e400}`, "input.n"},
		{`{"n": 1.7976931348623159e308}`, "input.n"},
		{`{"n": 1` + strings.Repeat("0", 400) + `}`, "input.n"},
		{`{"a": {"b": [1, 2, 1e309]}}`, "input.a.b[2]"},
		{`{"a": 1, "b": 1e999, "c": -1e999}`, "input.b"},
		{`{"text": "hi", "n": 1E+400}`, "input.n"},
	} {
		_, err := ParseInput(json.RawMessage(tt.give))
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(ie.Reason, "must be a number from -1.7976931348623157e+308 to 1.7976931348623157e+308") {
			t.Errorf("%.60s: err = %v, want an InputError for %s", tt.give, err, tt.field)
		}
	}
}
