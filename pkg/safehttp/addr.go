package safehttp

import (
	"net/netip"
	"strings"
)

// AddrError is an address that may not be reached, with the kind of range
// it belongs to. Its message ("127.0.0.1 is a loopback address") reaches
// developers as is, in webhook deliveries' last_error and flow node errors.
type AddrError struct {
	Addr  netip.Addr
	Range string
}

func (e *AddrError) Error() string { return e.Addr.String() + " is " + e.Kind() }

// Kind is the address's range as a phrase: "a loopback address", "an IETF
// protocol assignment address".
func (e *AddrError) Kind() string { return article(e.Range) + " " + e.Range + " address" }

// article is the indefinite article before a range's name. Each name
// starts with a word said as it is written or with letters spelt out
// (IETF: "eye"), never with a vowel said as a consonant ("unicast"), so
// a vowel letter takes "an"; TestAddrErrorReads holds every name to it.
func article(name string) string {
	if name != "" && strings.ContainsRune("aeiouAEIOU", rune(name[0])) {
		return "an"
	}
	return "a"
}

type special struct {
	prefix netip.Prefix
	name   string
}

// The IANA IPv4 Special-Purpose Address Registry, minus the entries it marks
// globally reachable, plus multicast and the metadata address cloud
// providers serve credentials on. The metadata entry comes before
// link-local so that its error names it.
var specialV4 = []special{
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (this network)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes 255.255.255.255
}

// IPv6 outside global unicast (2000::/3) is refused as a whole (it holds
// unspecified, loopback, IPv4-compatible, discard, unique-local,
// link-local, site-local and multicast space); these are the special ranges
// inside it.
var (
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
	nat64           = netip.MustParsePrefix("64:ff9b::/96")
	specialV6       = []special{
		{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
		{netip.MustParsePrefix("2001::/23"), "IETF protocol assignment"}, // Teredo, ORCHID, benchmarking, ...
		{netip.MustParsePrefix("2002::/16"), "6to4"},
		{netip.MustParsePrefix("3fff::/20"), "documentation"},
	}
	namedV6 = []special{
		{netip.MustParsePrefix("::/128"), "unspecified"},
		{netip.MustParsePrefix("::1/128"), "loopback"},
		{netip.MustParsePrefix("fc00::/7"), "private (unique local)"},
		{netip.MustParsePrefix("fe80::/10"), "link-local"},
		{netip.MustParsePrefix("ff00::/8"), "multicast"},
	}
)

// CheckAddr returns an *AddrError unless ip is a public unicast address.
// IPv4-mapped IPv6 (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) addresses
// are judged by the IPv4 address they carry, so no spelling of a private
// address gets through.
func CheckAddr(ip netip.Addr) error {
	ip = ip.WithZone("")
	if !ip.IsValid() {
		return &AddrError{Addr: ip, Range: "invalid"}
	}
	if ip.Is4In6() {
		if err := checkV4(ip.Unmap()); err != nil {
			return &AddrError{Addr: ip, Range: err.(*AddrError).Range}
		}
		return nil
	}
	if ip.Is4() {
		return checkV4(ip)
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		if err := checkV4(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); err != nil {
			return &AddrError{Addr: ip, Range: err.(*AddrError).Range}
		}
		return nil
	}
	if !globalUnicastV6.Contains(ip) {
		for _, s := range namedV6 {
			if s.prefix.Contains(ip) {
				return &AddrError{Addr: ip, Range: s.name}
			}
		}
		return &AddrError{Addr: ip, Range: "reserved"}
	}
	for _, s := range specialV6 {
		if s.prefix.Contains(ip) {
			return &AddrError{Addr: ip, Range: s.name}
		}
	}
	return nil
}

func checkV4(ip netip.Addr) error {
	for _, s := range specialV4 {
		if s.prefix.Contains(ip) {
			return &AddrError{Addr: ip, Range: s.name}
		}
	}
	return nil
}
