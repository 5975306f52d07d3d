package account_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// FuzzParseBearer feeds arbitrary Authorization headers and query strings to
// the parsers every request meets first: they must never panic, and a
// token they accept must be one b64token without spaces or separators
// (whether it is key-shaped is decided after).
func FuzzParseBearer(f *testing.F) {
	for _, seed := range []struct{ header, query string }{
		{"Bearer pk_" + strings.Repeat("a", 43), ""},
		{"bearer  pk_" + strings.Repeat("Z", 32) + " ", "limit=5"},
		{"Basic dXNlcjpwYXNz", "api_key=pk_x"},
		{"Bearer", "%zz&token="},
		{"Bearer pk_\x00\xff", "KEY=1;access_token=2"},
		{"", ""},
	} {
		f.Add(seed.header, seed.query)
	}
	f.Fuzz(func(t *testing.T, header, query string) {
		_ = account.CheckQuery(query)
		key, err := account.ParseBearer([]string{header})
		if err != nil {
			return
		}
		if key == "" || strings.ContainsAny(key, " \t,;\"\x00") || !strings.Contains(header, key) {
			t.Fatalf("accepted malformed token %q from %q", key, header)
		}
	})
}
