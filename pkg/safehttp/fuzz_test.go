package safehttp_test

import (
	"net/netip"
	"testing"

	"github.com/parleyhq/parley/pkg/safehttp"
)

// FuzzValidateURL feeds arbitrary URLs, as developers type them: the
// validator must never panic, and a URL it accepts without private targets
// must be https, without credentials, and not name a non-public address.
func FuzzValidateURL(f *testing.F) {
	for _, seed := range []string{
		"https://hooks.example.com/parley",
		"http://127.0.0.1:9000/x",
		"https://[::ffff:169.254.169.254]/",
		"https://user:pw@example.com/",
		"https://0x7f.1/",
		"https://localhost./",
		"https://example.com:99999/",
		"//no-scheme",
		"https://%zz",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := safehttp.ValidateURL(raw, false)
		if err != nil {
			return
		}
		if u.Scheme != "https" || u.User != nil {
			t.Fatalf("accepted %q", raw)
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && safehttp.CheckAddr(ip) != nil {
			t.Fatalf("accepted non-public address in %q", raw)
		}
	})
}
