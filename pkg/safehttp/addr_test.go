package safehttp

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give      string
		wantRange string // "" means allowed
	}{
		// Public addresses pass.
		{give: "8.8.8.8"},
		{give: "1.1.1.1"},
		{give: "93.184.216.34"},
		{give: "2606:4700:4700::1111"},
		{give: "2a00:1450:4001:82b::200e"},
		{give: "::ffff:8.8.8.8"},   // IPv4-mapped public
		{give: "64:ff9b::808:808"}, // NAT64 of 8.8.8.8
		// IPv4 special-purpose ranges.
		{give: "0.0.0.0", wantRange: "unspecified"},
		{give: "0.1.2.3", wantRange: "unspecified"},
		{give: "10.0.0.1", wantRange: "private"},
		{give: "10.255.255.255", wantRange: "private"},
		{give: "100.64.0.1", wantRange: "CGNAT"},
		{give: "100.127.255.254", wantRange: "CGNAT"},
		{give: "127.0.0.1", wantRange: "loopback"},
		{give: "127.255.0.9", wantRange: "loopback"},
		{give: "169.254.169.254", wantRange: "cloud metadata"},
		{give: "169.254.1.1", wantRange: "link-local"},
		{give: "172.16.0.1", wantRange: "private"},
		{give: "172.31.255.255", wantRange: "private"},
		{give: "192.0.0.8", wantRange: "IETF"},
		{give: "192.0.2.10", wantRange: "documentation"},
		{give: "192.88.99.1", wantRange: "6to4"},
		{give: "192.168.1.1", wantRange: "private"},
		{give: "198.18.0.1", wantRange: "benchmarking"},
		{give: "198.51.100.7", wantRange: "documentation"},
		{give: "203.0.113.9", wantRange: "documentation"},
		{give: "224.0.0.1", wantRange: "multicast"},
		{give: "239.255.255.250", wantRange: "multicast"},
		{give: "240.0.0.1", wantRange: "reserved"},
		{give: "255.255.255.255", wantRange: "reserved"},
		// Edges just outside the ranges pass.
		{give: "100.63.255.255"},
		{give: "100.128.0.0"},
		{give: "172.15.255.255"},
		{give: "172.32.0.0"},
		{give: "198.17.255.255"},
		{give: "198.20.0.0"},
		// IPv6.
		{give: "::", wantRange: "unspecified"},
		{give: "::1", wantRange: "loopback"},
		{give: "fe80::1", wantRange: "link-local"},
		{give: "fe80::1%eth0", wantRange: "link-local"},
		{give: "fc00::1", wantRange: "unique local"},
		{give: "fd00:ec2::254", wantRange: "unique local"}, // AWS metadata over IPv6
		{give: "ff02::1", wantRange: "multicast"},
		{give: "fec0::1", wantRange: "reserved"},      // deprecated site-local
		{give: "100::1", wantRange: "reserved"},       // discard-only
		{give: "::127.0.0.1", wantRange: "reserved"},  // IPv4-compatible (deprecated)
		{give: "64:ff9b:1::1", wantRange: "reserved"}, // local-use NAT64
		{give: "2001:db8::1", wantRange: "documentation"},
		{give: "3fff::1", wantRange: "documentation"},
		{give: "2001::1", wantRange: "IETF"}, // Teredo
		{give: "2002:7f00:1::1", wantRange: "6to4"},
		// IPv4-mapped and NAT64 spellings of special addresses.
		{give: "::ffff:127.0.0.1", wantRange: "loopback"},
		{give: "::ffff:7f00:1", wantRange: "loopback"},
		{give: "::ffff:10.1.2.3", wantRange: "private"},
		{give: "::ffff:169.254.169.254", wantRange: "cloud metadata"},
		{give: "::ffff:0.0.0.0", wantRange: "unspecified"},
		{give: "64:ff9b::7f00:1", wantRange: "loopback"},
		{give: "64:ff9b::a9fe:a9fe", wantRange: "cloud metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			t.Parallel()
			err := CheckAddr(netip.MustParseAddr(tt.give))
			if tt.wantRange == "" {
				if err != nil {
					t.Fatalf("CheckAddr(%s) = %v, want allowed", tt.give, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckAddr(%s) allowed it, want refused as %s", tt.give, tt.wantRange)
			}
			if !strings.Contains(err.Error(), tt.wantRange) {
				t.Fatalf("CheckAddr(%s) = %q, want it to name %q", tt.give, err, tt.wantRange)
			}
		})
	}
}

func TestCheckAddrRefusesInvalid(t *testing.T) {
	t.Parallel()
	if err := CheckAddr(netip.Addr{}); err == nil {
		t.Fatal("the zero Addr was allowed")
	}
}

// Every refusal reads as English: each range's name with its article, the
// names of every table and the ranges CheckAddr names outside them.
func TestAddrErrorReads(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"cloud metadata":             "a cloud metadata address",
		"unspecified (this network)": "an unspecified (this network) address",
		"unspecified":                "an unspecified address",
		"private":                    "a private address",
		"private (unique local)":     "a private (unique local) address",
		"shared (CGNAT)":             "a shared (CGNAT) address",
		"loopback":                   "a loopback address",
		"link-local":                 "a link-local address",
		"IETF protocol assignment":   "an IETF protocol assignment address",
		"documentation":              "a documentation address",
		"6to4 relay":                 "a 6to4 relay address",
		"6to4":                       "a 6to4 address",
		"benchmarking":               "a benchmarking address",
		"multicast":                  "a multicast address",
		"reserved":                   "a reserved address",
		"invalid":                    "an invalid address",
	}
	names := []string{"reserved", "invalid"}
	for _, table := range [][]special{specialV4, specialV6, namedV6} {
		for _, s := range table {
			names = append(names, s.name)
		}
	}
	for _, name := range names {
		phrase, ok := want[name]
		if !ok {
			t.Errorf("range %q: add how its refusal reads to this test", name)
			continue
		}
		if got := (&AddrError{Range: name}).Kind(); got != phrase {
			t.Errorf("range %q reads %q, want %q", name, got, phrase)
		}
	}
	for give, msg := range map[string]string{
		"0.0.0.0":   "0.0.0.0 is an unspecified (this network) address",
		"::":        ":: is an unspecified address",
		"192.0.0.8": "192.0.0.8 is an IETF protocol assignment address",
		"2001::1":   "2001::1 is an IETF protocol assignment address",
		"10.1.2.3":  "10.1.2.3 is a private address",
	} {
		if err := CheckAddr(netip.MustParseAddr(give)); err == nil || err.Error() != msg {
			t.Errorf("CheckAddr(%s) = %v, want %q", give, err, msg)
		}
	}
	if err := CheckAddr(netip.Addr{}); err == nil || err.Error() != "invalid IP is an invalid address" {
		t.Errorf("CheckAddr(zero) = %v", err)
	}
}
