package safehttp

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestValidateURL(t *testing.T) {
	t.Parallel()
	long := "https://hooks.example.com/" + strings.Repeat("a", MaxURLLength)
	exact := "https://hooks.example.com/" + strings.Repeat("a", MaxURLLength-len("https://hooks.example.com/"))
	tests := []struct {
		name         string
		give         string
		allowPrivate bool
		wantErr      string // substring; "" means valid
	}{
		{name: "public https", give: "https://hooks.example.com/parley?x=1"},
		{name: "public https with port", give: "https://hooks.example.com:8443/in"},
		{name: "public ip literal", give: "https://93.184.216.34/in"},
		{name: "exactly max length", give: exact},
		{name: "empty", give: "", wantErr: "url is required"},
		{name: "too long", give: long, wantErr: "url must be at most 2048 characters"},
		{name: "relative", give: "/hooks", wantErr: "url must be an absolute"},
		{name: "no scheme", give: "hooks.example.com/in", wantErr: "url must be an absolute"},
		{name: "ftp", give: "ftp://hooks.example.com/in", wantErr: "url must be an absolute http or https URL"},
		{name: "javascript", give: "javascript:alert(1)", wantErr: "url must be an absolute"},
		{name: "no host", give: "https:///in", wantErr: "url must be an absolute"},
		{name: "garbage", give: "https://exa mple.com", wantErr: "url must be an absolute"},
		{name: "http without private", give: "http://hooks.example.com/in", wantErr: "url must use https"},
		{name: "userinfo", give: "https://user:pw@hooks.example.com/in", wantErr: "url must not contain credentials"},
		{name: "user only", give: "https://user@hooks.example.com/in", wantErr: "url must not contain credentials"},
		{name: "port zero", give: "https://hooks.example.com:0/in", wantErr: "url has an invalid port"},
		{name: "port too big", give: "https://hooks.example.com:70000/in", wantErr: "url has an invalid port"},
		{name: "loopback literal", give: "https://127.0.0.1/in", wantErr: "url must point to a public address"},
		{name: "private literal", give: "https://10.1.2.3/in", wantErr: "url must point to a public address"},
		{name: "metadata literal", give: "https://169.254.169.254/latest", wantErr: "cloud metadata"},
		{name: "ipv6 loopback", give: "https://[::1]/in", wantErr: "url must point to a public address"},
		{name: "mapped loopback", give: "https://[::ffff:127.0.0.1]/in", wantErr: "url must point to a public address"},
		{name: "localhost", give: "https://localhost/in", wantErr: "url must point to a public address"},
		{name: "sub.localhost", give: "https://app.localhost/in", wantErr: "url must point to a public address"},
		{name: "single label", give: "https://intranet-box/in", wantErr: "url must point to a public address"},
		{name: "dot local", give: "https://printer.local/in", wantErr: "url must point to a public address"},
		{name: "dot internal", give: "https://api.internal/in", wantErr: "url must point to a public address"},
		{name: "trailing dot localhost", give: "https://localhost./in", wantErr: "url must point to a public address"},
		{name: "localhost.localdomain", give: "https://localhost.localdomain/in", wantErr: "localhost.localdomain is a local name"},
		// Other spellings of IPv4 addresses, which WHATWG URL parsers
		// read as 127.0.0.1 (or another address).
		{name: "octal", give: "https://0177.0.0.1/in", wantErr: "0177.0.0.1 is not an IP address in standard form"},
		{name: "short", give: "https://127.1/in", wantErr: "127.1 is not an IP address in standard form"},
		{name: "decimal", give: "https://2130706433/in", wantErr: "is not an IP address in standard form"},
		{name: "hex", give: "https://0x7f000001/in", wantErr: "is not an IP address in standard form"},
		{name: "hex parts", give: "https://0x7f.0x0.0x0.0x1/in", wantErr: "is not an IP address in standard form"},
		{name: "bare 0x", give: "https://0x/in", wantErr: "is not an IP address in standard form"},
		{name: "trailing dot ip", give: "https://127.0.0.1./in", wantErr: "is not an IP address in standard form"},
		{name: "trailing dot public ip", give: "https://93.184.216.34./in", wantErr: "is not an IP address in standard form"},
		{name: "numeric last label", give: "https://hooks.example.123/in", wantErr: "is not an IP address in standard form"},
		{name: "digits inside a name", give: "https://hooks1.example2.com/in"},
		{name: "0x inside a name", give: "https://0xdead.example.com/in"},
		{name: "hex-looking tld", give: "https://hooks.example.cafe/in"},
		// With private targets allowed (development), http and local
		// addresses are fine; the other rules still hold.
		{name: "private: http loopback", give: "http://127.0.0.1:8080/in", allowPrivate: true},
		{name: "private: localhost", give: "http://localhost:9000/in", allowPrivate: true},
		{name: "private: still no credentials", give: "http://u:p@127.0.0.1/in", allowPrivate: true, wantErr: "url must not contain credentials"},
		{name: "private: still no ftp", give: "ftp://127.0.0.1/in", allowPrivate: true, wantErr: "url must be an absolute http or https URL"},
		{name: "private: still bounded", give: long, allowPrivate: true, wantErr: "url must be at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := ValidateURL(tt.give, tt.allowPrivate)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateURL(%q) = %v, want valid", tt.give, err)
				}
				if u.String() != tt.give {
					t.Fatalf("ValidateURL(%q) returned %q", tt.give, u)
				}
				return
			}
			var ue *URLError
			if !errors.As(err, &ue) {
				t.Fatalf("ValidateURL(%q) = %v, want a *URLError", tt.give, err)
			}
			if !strings.HasPrefix(err.Error(), "url ") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ValidateURL(%q) = %q, want it to contain %q", tt.give, err, tt.wantErr)
			}
		})
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return addrs, nil
}

func TestCheckResolved(t *testing.T) {
	t.Parallel()
	r := fakeResolver{
		"public.example.com":  {netip.MustParseAddr("93.184.216.34")},
		"private.example.com": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.5")},
		"meta.example.com":    {netip.MustParseAddr("169.254.169.254")},
	}
	tests := []struct {
		give    string
		wantErr string
	}{
		{give: "https://public.example.com/in"},
		{give: "https://unknown.example.com/in"}, // lookup fails: left to the dial-time check
		{give: "https://93.184.216.34/in"},
		{give: "https://private.example.com/in", wantErr: "url must point to a public address: private.example.com resolves to 10.0.0.5, a private address"},
		{give: "https://meta.example.com/in", wantErr: "cloud metadata"},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.give)
		err := CheckResolved(context.Background(), r, u)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckResolved(%s) = %v, want nil", tt.give, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckResolved(%s) = %v, want %q", tt.give, err, tt.wantErr)
		}
	}
}
