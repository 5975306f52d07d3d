package httpx_test

import (
	"testing"

	"github.com/parleyhq/parley/pkg/httpx"
)

func TestNULEscapes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		body, replaced string
		at             int
	}{
		{`{"text":"hi"}`, `{"text":"hi"}`, -1},
		{`{"text":"a\u0000b"}`, `{"text":"a\ufffdb"}`, 10},
		{`{"text":"\\u0000"}`, `{"text":"\\u0000"}`, -1},
		{`{"text":"\\\u0000"}`, `{"text":"\\\ufffd"}`, 11},
		{`{"a":"\\u0000","b":"\u0000\u0000"}`, `{"a":"\\u0000","b":"\ufffd\ufffd"}`, 20},
		{`\u0000`, `\ufffd`, 0},
	} {
		if got := httpx.IndexNULEscape([]byte(tt.body)); got != tt.at {
			t.Errorf("IndexNULEscape(%s) = %d, want %d", tt.body, got, tt.at)
		}
		if got := string(httpx.ReplaceNULEscapes([]byte(tt.body))); got != tt.replaced {
			t.Errorf("ReplaceNULEscapes(%s) = %s, want %s", tt.body, got, tt.replaced)
		}
	}
}
