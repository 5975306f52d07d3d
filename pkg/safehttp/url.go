package safehttp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLLength bounds a URL: a webhook's, or a flow http node's once its
// templates are filled in.
const MaxURLLength = 2048

// URLError says why a URL may not be used; Error() names the field
// ("url must use https"), as invalid_request messages must.
type URLError struct {
	Reason string
}

func (e *URLError) Error() string { return "url " + e.Reason }

// ValidateURL checks a URL a developer wants to save (or a flow is about to
// call) and returns it parsed.
// It must be an absolute http(s) URL of at most MaxURLLength characters
// without credentials. Unless allowPrivate, it must be https and its host
// must not be a loopback, private or otherwise special address or name;
// host names are checked again on every dial (see DialControl), since DNS
// answers change.
func ValidateURL(raw string, allowPrivate bool) (*url.URL, error) {
	if raw == "" {
		return nil, &URLError{"is required"}
	}
	if len(raw) > MaxURLLength {
		return nil, &URLError{fmt.Sprintf("must be at most %d characters", MaxURLLength)}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, &URLError{"must be an absolute http or https URL"}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowPrivate {
			return nil, &URLError{"must use https"}
		}
	default:
		return nil, &URLError{"must be an absolute http or https URL"}
	}
	if u.User != nil {
		return nil, &URLError{"must not contain credentials"}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, &URLError{"has an invalid port"}
		}
	}
	if allowPrivate {
		return u, nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := CheckAddr(ip); err != nil {
			return nil, &URLError{"must point to a public address: " + err.Error()}
		}
		return u, nil
	}
	if endsInNumber(host) {
		return nil, &URLError{"must point to a public address: " + host + " is not an IP address in standard form"}
	}
	if specialName(host) {
		return nil, &URLError{"must point to a public address: " + host + " is a local name"}
	}
	return u, nil
}

// endsInNumber reports a host whose last label is a number (decimal, or
// hexadecimal after 0x). No DNS name ends so, and the WHATWG URL standard
// (browsers, curl and many HTTP clients) reads such a host as an IPv4
// address in another spelling: 0177.0.0.1, 127.1, 0x7f.1 and 127.0.0.1.
// are all 127.0.0.1. Only the standard dotted form is judged as an
// address; these are refused, whatever they would resolve to.
func endsInNumber(host string) bool {
	h := strings.TrimSuffix(host, ".")
	last := h[strings.LastIndexByte(h, '.')+1:]
	digits := "0123456789"
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		last, digits = last[2:], "0123456789abcdefABCDEF"
		if last == "" {
			return true // "0x" is zero
		}
	}
	return last != "" && strings.Trim(last, digits) == ""
}

// specialName reports names that never lead to a public address: localhost
// and the special-use and private-use domains.
func specialName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if !strings.Contains(h, ".") {
		// A single label resolves through the local search path, never
		// to a public name.
		return true
	}
	for _, suffix := range []string{"localhost", "localdomain", "local", "internal", "home.arpa", "invalid", "lan", "intranet", "corp"} {
		if h == suffix || strings.HasSuffix(h, "."+suffix) {
			return true
		}
	}
	return false
}

// Resolver looks up a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckResolved refuses a URL whose host name resolves to a non-public
// address, so a developer learns it at save time rather than from failed
// calls. A failed lookup is not an error here: DNS may be down or not
// yet set up, and every dial is checked anyway.
func CheckResolved(ctx context.Context, r Resolver, u *url.URL) error {
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		var refused *AddrError
		if errors.As(CheckAddr(a), &refused) {
			return &URLError{"must point to a public address: " + host + " resolves to " + refused.Addr.String() + ", " + refused.Kind()}
		}
	}
	return nil
}
