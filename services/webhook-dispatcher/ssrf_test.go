package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/net/dns/dnsmessage"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// DNS rebinding, through the full path: a webhook is saved under a public
// looking host name while that name resolves to a public address (the
// check at save time passes), then the name is pointed at 127.0.0.1, where
// a canary listens. Every attempt resolves the name again, and the dialer's
// guard refuses the resolved loopback address before connecting: the canary
// never sees a connection, and the delivery is failed with a last_error
// that names the refused address and why. Earlier, the check at save time
// refuses the name while it resolves to loopback.
//
// The dispatcher's resolver is the test seam (seams.resolver, a
// *net.Resolver): the test runs a small DNS server speaking the real wire
// format and points the resolver at it. That keeps the system resolver,
// /etc/hosts and the network out of the test, and exercises exactly what
// production does: the Go resolver answering the dialer, and the guard
// judging the answer.
func TestDialTimeGuardDefeatsDNSRebinding(t *testing.T) {
	t.Parallel()
	var canaryConns atomic.Int32
	canary := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	canary.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			canaryConns.Add(1)
		}
	}
	canary.StartTLS()
	t.Cleanup(canary.Close)
	_, port, _ := net.SplitHostPort(canary.Listener.Addr().String())

	const host = "hooks.shop-example.com"
	dns := newFakeDNS(t)
	h := startWith(t, testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS)), func(c *svcconfig.Config) {
		c.AllowPrivateTargets = false
		c.AttemptTimeout = 2 * time.Second
	}, seams{resolver: dns.resolver()})
	ws := uuid.NewString()
	url := "https://" + host + ":" + port + "/parley"

	// While the name points at loopback, saving is refused.
	dns.set(host, "127.0.0.1")
	h.wantError(ws, http.MethodPut, "/v1/webhook", map[string]string{"url": url}, http.StatusBadRequest, "invalid_request",
		"url must point to a public address: "+host+" resolves to 127.0.0.1, a loopback address")

	// Public at save time; loopback when delivering.
	dns.set(host, "93.184.216.34")
	h.saveWebhook(ws, url)
	dns.set(host, "127.0.0.1")
	ev := messageEvent(ws, false)
	h.publish(ev)

	d := h.waitDelivery(ws, ev.GetId())
	if d.Status != "failed" || d.Attempts != 4 || d.ResponseStatus != nil || d.DeliveredAt != nil {
		t.Errorf("log entry %s, want failed after 4 refused attempts", jsonOf(d))
	}
	want := "refused to connect to 127.0.0.1:" + port + ": 127.0.0.1 is a loopback address"
	if e := text(d.LastError); e != want {
		t.Errorf("last_error %q, want %q", e, want)
	}
	for _, a := range h.history(ev.GetId()) {
		if a["error"] != want {
			t.Errorf("attempt %v: error %v", a["number"], a["error"])
		}
	}
	if n := dns.lookups(host); n < 2*4 {
		t.Errorf("the name was resolved %d times; every attempt must resolve it again", n)
	}
	if n := canaryConns.Load(); n != 0 {
		t.Fatalf("the canary on loopback got %d connections", n)
	}

	// Every kind of special address the name may be rebound to, A or
	// AAAA, is refused at the dial with its range named; test events
	// (one synchronous attempt) go through the same sender.
	for _, tt := range []struct{ addr, kind string }{
		{"127.0.0.1", "a loopback"},
		{"::ffff:127.0.0.1", "a loopback"}, // an AAAA record carrying IPv4 loopback
		{"::1", "a loopback"},
		{"10.0.0.1", "a private"},
		{"172.16.5.4", "a private"},
		{"192.168.1.1", "a private"},
		{"169.254.169.254", "a cloud metadata"},
		{"169.254.1.1", "a link-local"},
		{"100.64.0.1", "a shared (CGNAT)"},
		{"0.0.0.0", "an unspecified (this network)"},
		{"224.0.0.1", "a multicast"},
		{"198.18.0.1", "a benchmarking"},
		{"192.0.2.1", "a documentation"},
		{"fd00:ec2::254", "a private (unique local)"},
		{"fe80::1", "a link-local"},
		{"64:ff9b::a00:1", "a private"}, // NAT64 of 10.0.0.1
		{"2001:db8::1", "a documentation"},
	} {
		dns.set(host, tt.addr)
		d := call[dispatcherapi.DeliveryResponse](h, ws, http.MethodPost, "/v1/webhook/test", nil, http.StatusOK).Delivery
		e := text(d.LastError)
		if d.Status != "failed" || d.ResponseStatus != nil || !strings.HasPrefix(e, "refused to connect to ") || !strings.HasSuffix(e, " is "+tt.kind+" address") {
			t.Errorf("%s resolving to %s: test delivery %s, want refused as %s address", host, tt.addr, jsonOf(d), tt.kind)
		}
	}
	if n := canaryConns.Load(); n != 0 {
		t.Fatalf("the canary on loopback got %d connections", n)
	}
}

// fakeDNS answers A and AAAA queries over UDP from a table (one address
// per name, answered to the query of its family); other names are
// NXDOMAIN.
type fakeDNS struct {
	conn net.PacketConn
	mu   sync.Mutex
	a    map[string]netip.Addr // by lower-case FQDN
	seen map[string]int
}

func newFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDNS{conn: conn, a: map[string]netip.Addr{}, seen: map[string]int{}}
	t.Cleanup(func() { _ = conn.Close() })
	go f.serve()
	return f
}

func (f *fakeDNS) set(name, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.a[strings.ToLower(name)+"."] = netip.MustParseAddr(addr)
}

// lookups is how many queries (A and AAAA) for name were answered.
func (f *fakeDNS) lookups(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[strings.ToLower(name)+"."]
}

// resolver is a Go resolver that asks f, whatever resolv.conf says.
func (f *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", f.conn.LocalAddr().String())
	}}
}

func (f *fakeDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := f.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp, ok := f.answer(buf[:n]); ok {
			_, _ = f.conn.WriteTo(resp, from)
		}
	}
}

func (f *fakeDNS) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	hdr, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(q.Name.String())
	f.mu.Lock()
	addr, known := f.a[name]
	if known && (q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeAAAA) {
		f.seen[name]++
	}
	f.mu.Unlock()

	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionDesired: hdr.RecursionDesired, RCode: rcode})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	// TTL 0: nothing may cache the answer (the rebinding attacker's
	// choice, too).
	rh := dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: dnsmessage.ClassINET, TTL: 0}
	switch {
	case !known:
	case q.Type == dnsmessage.TypeA && addr.Is4():
		if b.AResource(rh, dnsmessage.AResource{A: addr.As4()}) != nil {
			return nil, false
		}
	case q.Type == dnsmessage.TypeAAAA && addr.Is6():
		if b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: addr.As16()}) != nil {
			return nil, false
		}
	}
	resp, err := b.Finish()
	return resp, err == nil
}
