// Package proxy plays a server going down and coming back, for tests of
// outages: a TCP proxy on a loopback port in front of the real server
// (PostgreSQL, Redis, NATS) that the test can cut and restore. The shared
// servers keep running for every other test.
package proxy

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards each connection made to Addr to the target server.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cut    bool
	newTap func() func([]byte)
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// Tap makes each connection forwarded from now on hand every chunk of
// bytes the server sends to a tap of its own, made for it by newTap,
// before the client gets it: a test reads the server's side of the
// protocol (PostgreSQL's ReadyForQuery messages count its round trips).
// A connection's tap is called from one goroutine; taps of different
// connections run at once.
func (p *Proxy) Tap(newTap func() func(fromServer []byte)) {
	p.mu.Lock()
	p.newTap = newTap
	p.mu.Unlock()
}

// tapWriter gives what it is written to a tap.
type tapWriter func([]byte)

func (w tapWriter) Write(b []byte) (int, error) {
	w(b)
	return len(b), nil
}

// Start listens on a free loopback port and forwards to target
// ("host:port") until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Front starts a proxy in front of the server of raw (a postgres://,
// redis:// or nats:// URL) and returns it with raw pointed at it: the URL
// to give the code under test.
func Front(t testing.TB, raw string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := Start(t, u.Host)
	return p, p.URL(t, raw)
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns raw (a postgres://, redis:// or nats:// URL of the target)
// with its host and port replaced by the proxy's.
func (p *Proxy) URL(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	u.Host = p.Addr()
	return u.String()
}

// Cut plays the server going down: every open connection is closed, and
// new ones are reset as soon as they are made (the port stays the proxy's,
// so nobody else can take it meanwhile).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore plays the server coming back: connections are forwarded again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.cut
		p.mu.Unlock()
		if refuse {
			// A reset rather than an orderly close, as from a port that
			// nothing listens on.
			if tcp, ok := c.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	defer p.untrack(client, server)
	p.mu.Lock()
	newTap := p.newTap
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst net.Conn, src io.Reader) {
		_, _ = io.Copy(dst, src)
		// One side ended: end the other, as a server process exiting
		// would.
		_ = client.Close()
		_ = server.Close()
		done <- struct{}{}
	}
	fromServer := io.Reader(server)
	if newTap != nil {
		fromServer = io.TeeReader(server, tapWriter(newTap()))
	}
	go pipe(server, client)
	go pipe(client, fromServer)
	<-done
	<-done
}

// track registers a forwarded pair, unless the proxy was cut meanwhile.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}
