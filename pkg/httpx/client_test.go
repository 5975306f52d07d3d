package httpx_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/httpx"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	lb, err := httpx.ParseProxies("10.0.0.0/8, 192.0.2.7 2001:db8:1::/48")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		proxies httpx.Proxies
		peer    string
		xff     []string
		want    string
	}{
		{name: "no proxy trusted: the peer", peer: "203.0.113.5:4000", want: "203.0.113.5"},
		{name: "no proxy trusted: a forged header is ignored", peer: "203.0.113.5:4000", xff: []string{"1.2.3.4"}, want: "203.0.113.5"},
		{name: "an untrusted peer's header is ignored", proxies: lb, peer: "203.0.113.5:4000", xff: []string{"1.2.3.4"}, want: "203.0.113.5"},
		{name: "behind a trusted proxy", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
		{name: "what the client wrote is left of what the proxy saw", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"1.2.3.4, 198.51.100.9"}, want: "198.51.100.9"},
		{name: "a chain of trusted proxies", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"198.51.100.9, 192.0.2.7", "10.9.9.9"}, want: "198.51.100.9"},
		{name: "garbage stops the walk at the last trusted hop", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"1.2.3.4, nonsense, 10.2.2.2"}, want: "10.2.2.2"},
		{name: "trusted peer without a header", proxies: lb, peer: "10.1.2.3:4000", want: "10.1.2.3"},
		{name: "IPv4-mapped peer", peer: "[::ffff:203.0.113.5]:4000", want: "203.0.113.5"},
		{name: "IPv6 behind a trusted IPv6 proxy", proxies: lb, peer: "[2001:db8:1::5]:443", xff: []string{"2001:db8:9::1"}, want: "2001:db8:9::1"},
		{name: "an entry with a port is its address", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"1.2.3.4, 198.51.100.9:51234"}, want: "198.51.100.9"},
		{name: "an IPv6 entry with a port is its address", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"[2001:db8:9::1]:443"}, want: "2001:db8:9::1"},
		{name: "a trusted proxy with a port is skipped", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"198.51.100.9, 192.0.2.7:8443"}, want: "198.51.100.9"},
		{name: "an IPv4-mapped entry with a port", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"[::ffff:198.51.100.9]:80"}, want: "198.51.100.9"},
		{name: "a port that is no port is garbage", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"198.51.100.9:http"}, want: "10.1.2.3"},
		{name: "a port out of range is garbage", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"198.51.100.9:65536"}, want: "10.1.2.3"},
		{name: "an unbracketed IPv6 address is no address and port", proxies: lb, peer: "10.1.2.3:4000", xff: []string{"2001:db8:9::1:443"}, want: "2001:db8:9::1:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			r.Header.Set("X-Real-IP", "6.6.6.6")
			if got := tt.proxies.ClientAddr(r); got.String() != tt.want {
				t.Fatalf("ClientAddr = %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := httpx.ParseProxies("10.0.0.0/8,not-an-ip"); err == nil {
		t.Fatal("a bad TRUSTED_PROXIES entry was taken")
	}
	if p, err := httpx.ParseProxies(""); err != nil || len(p) != 0 {
		t.Fatalf("empty TRUSTED_PROXIES = %v, %v", p, err)
	}
}

func TestLimitKeyGroupsIPv6By64(t *testing.T) {
	t.Parallel()
	tests := []struct{ give, want string }{
		{"203.0.113.5", "203.0.113.5"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"},
	}
	for _, tt := range tests {
		if got := httpx.LimitKey(netip.MustParseAddr(tt.give)); got != tt.want {
			t.Errorf("LimitKey(%s) = %s, want %s", tt.give, got, tt.want)
		}
	}
	if got := httpx.LimitKey(netip.Addr{}); got != "unknown" {
		t.Errorf("LimitKey(zero) = %s", got)
	}
}

func TestEchoRealIPIsThePeer(t *testing.T) {
	t.Parallel()
	e := httpx.NewEcho(zap.NewNop())
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "203.0.113.5:4000"
	r.Header.Set("X-Forwarded-For", "1.2.3.4")
	r.Header.Set("X-Real-IP", "5.6.7.8")
	if got := e.NewContext(r, httptest.NewRecorder()).RealIP(); got != "203.0.113.5" {
		t.Fatalf("RealIP = %s, want the peer", got)
	}
}

// FuzzClientAddr: whatever X-Forwarded-For holds, behind a trusted proxy
// the client is a valid address, unmapped, and the same whether or not
// each entry carries a port.
func FuzzClientAddr(f *testing.F) {
	for _, seed := range []string{"198.51.100.9", "1.2.3.4, 198.51.100.9:51234", "[2001:db8:9::1]:443", "198.51.100.9, 192.0.2.7:8443",
		"[::ffff:198.51.100.9]:80", "198.51.100.9:http", "nonsense", "", ",,", "[2001:db8::1]", "fe80::1%eth0"} {
		f.Add(seed)
	}
	lb, err := httpx.ParseProxies("10.0.0.0/8, 192.0.2.7")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, xff string) {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.RemoteAddr = "10.1.2.3:4000"
		r.Header.Set("X-Forwarded-For", xff)
		got := lb.ClientAddr(r)
		if !got.IsValid() || got.Is4In6() {
			t.Fatalf("ClientAddr(%q) = %v", xff, got)
		}
		var ported []string
		for _, hop := range strings.Split(xff, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(hop)); err == nil {
				hop = netip.AddrPortFrom(a, 443).String()
			}
			ported = append(ported, hop)
		}
		r.Header.Set("X-Forwarded-For", strings.Join(ported, ","))
		if withPorts := lb.ClientAddr(r); withPorts != got {
			t.Fatalf("ClientAddr(%q) = %v, with ports %v", xff, got, withPorts)
		}
	})
}
