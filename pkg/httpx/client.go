package httpx

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies (load balancers, ingress controllers)
// trusted to say who the client is (TRUSTED_PROXIES). Limits per client
// address count what ClientAddr returns, so it must not be what any client
// can claim: echo's RealIP believes X-Forwarded-For and X-Real-IP from
// anyone by default, which would let a client pick a fresh address per
// request and walk around every per-address limit.
type Proxies []netip.Prefix

// ParseProxies reads TRUSTED_PROXIES: addresses and CIDR ranges separated
// by commas or spaces ("10.0.0.0/8, 192.0.2.7"); empty trusts none.
func ParseProxies(list string) (Proxies, error) {
	var out Proxies
	for _, item := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("TRUSTED_PROXIES: %q is neither an address nor a CIDR range", item)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Proxying is the TRUSTED_PROXIES setting, embedded in the configuration
// of each service that counts or limits by client address (the gateway,
// messaging, the console) and loaded with it by pkg/config.
type Proxying struct {
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (addresses or CIDR ranges); empty: the connection's peer
	// is the client, whatever the headers say.
	TrustedProxies string `env:"TRUSTED_PROXIES"`
}

// Proxies parses TrustedProxies (checked by Validate).
func (p Proxying) Proxies() Proxies {
	proxies, _ := ParseProxies(p.TrustedProxies)
	return proxies
}

// Validate checks TrustedProxies; a service's Validate calls it.
func (p Proxying) Validate() error {
	_, err := ParseProxies(p.TrustedProxies)
	return err
}

func (p Proxies) trusts(a netip.Addr) bool {
	for _, r := range p {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr is the address of the client that sent r. With no trusted
// proxy it is the connection's peer. When the peer is a trusted proxy, the
// X-Forwarded-For chain is read from the right (each proxy appends the
// address it saw), skipping trusted proxies: the first address no trusted
// proxy vouches beyond is the client. Entries a client wrote itself sit to
// the left of that and are never read. An entry may carry the port the
// proxy saw (203.0.113.7:51234, [2001:db8::1]:443), as some load balancers
// write it: the address alone counts. The zero Addr means the peer
// address could not be read (not a TCP connection).
func (p Proxies) ClientAddr(r *http.Request) netip.Addr {
	peer := peerAddr(r.RemoteAddr)
	if len(p) == 0 || !peer.IsValid() || !p.trusts(peer) {
		return peer
	}
	client := peer
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := hopAddr(strings.TrimSpace(hops[i]))
		if !ok {
			// A garbled entry: nothing to its left can be believed, and
			// the last trusted hop saw whoever wrote it.
			return client
		}
		client = a.Unmap()
		if !p.trusts(client) {
			return client
		}
	}
	return client
}

// hopAddr reads one X-Forwarded-For entry: an address, or an address and
// a port. A port alone would make each connection of one client a
// different client.
func hopAddr(hop string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(hop); err == nil {
		return a, true
	}
	if ap, err := netip.ParseAddrPort(hop); err == nil {
		return ap.Addr(), true
	}
	return netip.Addr{}, false
}

func peerAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// LimitKey is how per-address limits count a client: an IPv4 address
// whole, an IPv6 address by its /64, since one subscriber is routinely given
// a whole /64 and could otherwise take a fresh address per request.
func LimitKey(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
