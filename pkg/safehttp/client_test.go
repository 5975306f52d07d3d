package safehttp

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func call(t *testing.T, c *Client, r Request) (Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return c.Call(ctx, r)
}

func TestClientCall(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, uri, body, ua, custom string
		length                        int64
	}
	var last atomic.Pointer[seen]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		last.Store(&seen{method: r.Method, uri: r.RequestURI, body: string(b), ua: r.UserAgent(), custom: r.Header.Get("X-Order"), length: r.ContentLength})
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		case "/moved":
			w.Header().Set("Location", "http://169.254.169.254/latest")
			w.WriteHeader(http.StatusFound)
		}
		_, _ = io.WriteString(w, `{"status":"shipped"}`)
	}))
	t.Cleanup(srv.Close)
	c := NewClient(Options{AllowPrivate: true, UserAgent: "Parley-Flows/test"})

	tests := []struct {
		name       string
		give       Request
		wantStatus int
		wantSeen   seen
	}{
		{
			name:       "get by default, user agent filled in",
			give:       Request{URL: srv.URL + "/orders/42?x=1"},
			wantStatus: 200,
			wantSeen:   seen{method: "GET", uri: "/orders/42?x=1", ua: "Parley-Flows/test"},
		},
		{
			name:       "post with headers and body",
			give:       Request{Method: "POST", URL: srv.URL + "/orders", Headers: map[string]string{"X-Order": "42", "User-Agent": "shop-bot"}, Body: []byte(`{"id":42}`), Timeout: time.Second},
			wantStatus: 200,
			wantSeen:   seen{method: "POST", uri: "/orders", body: `{"id":42}`, ua: "shop-bot", custom: "42", length: 9},
		},
		{
			name:       "non-2xx is a response",
			give:       Request{Method: "DELETE", URL: srv.URL + "/missing"},
			wantStatus: 404,
			wantSeen:   seen{method: "DELETE", uri: "/missing", ua: "Parley-Flows/test"},
		},
		{
			name:       "a redirect is a response, not followed",
			give:       Request{URL: srv.URL + "/moved"},
			wantStatus: 302,
			wantSeen:   seen{method: "GET", uri: "/moved", ua: "Parley-Flows/test"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the server keeps only the last request.
			resp, err := call(t, c, tt.give)
			if err != nil {
				t.Fatalf("Call = %v", err)
			}
			if got := *last.Load(); got != tt.wantSeen {
				t.Errorf("server saw %+v, want %+v", got, tt.wantSeen)
			}
			if resp.Status != tt.wantStatus || string(resp.Body) != `{"status":"shipped"}` {
				t.Errorf("response %d %s", resp.Status, resp.Body)
			}
			if resp.Headers["content-type"] != "application/json" || resp.Headers["set-cookie"] != "a=1, b=2" {
				t.Errorf("headers %v, want lower-case names and repeated values joined", resp.Headers)
			}
		})
	}
}

func TestClientBounds(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/exact", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(make([]byte, MaxResponseBody))
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.Copy(w, io.LimitReader(zeros{}, 4<<20))
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	mux.HandleFunc("/drip", func(w http.ResponseWriter, r *http.Request) {
		for range 100 {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := NewClient(Options{AllowPrivate: true})

	if resp, err := call(t, c, Request{URL: srv.URL + "/exact"}); err != nil || len(resp.Body) != MaxResponseBody {
		t.Errorf("a body of exactly MaxResponseBody: %d bytes, %v", len(resp.Body), err)
	}
	var tooLarge *TooLargeError
	if resp, err := call(t, c, Request{URL: srv.URL + "/huge"}); !errors.As(err, &tooLarge) || resp.Body != nil {
		t.Errorf("a 4 MiB body: %d bytes, %v; want a *TooLargeError", len(resp.Body), err)
	}
	if _, err := call(t, c, Request{Method: "POST", URL: srv.URL + "/exact", Body: make([]byte, MaxRequestBody+1)}); err == nil || !strings.Contains(err.Error(), "request body is larger than 1 MiB") {
		t.Errorf("a request body over the cap: %v", err)
	}

	// The timeout covers the wait for headers and the body's last byte.
	for _, path := range []string{"/hang", "/drip"} {
		start := time.Now()
		_, err := call(t, c, Request{URL: srv.URL + path, Timeout: 200 * time.Millisecond})
		var te *TimeoutError
		if !errors.As(err, &te) || err.Error() != "no answer within 200ms" {
			t.Errorf("%s: %v, want a *TimeoutError", path, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: a 200ms call took %s", path, took)
		}
	}

	// The caller's context ending first is the caller's error, not a
	// timeout of the call.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := c.Call(ctx, Request{URL: srv.URL + "/hang", Timeout: 5 * time.Second}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct{ give, want time.Duration }{
		{0, MaxTimeout},
		{-time.Second, MaxTimeout},
		{time.Millisecond, time.Millisecond},
		{MaxTimeout, MaxTimeout},
		{time.Minute, MaxTimeout},
	}
	for _, tt := range tests {
		if got := callTimeout(tt.give); got != tt.want {
			t.Errorf("callTimeout(%s) = %s, want %s", tt.give, got, tt.want)
		}
	}
}

func TestClientErrorsLeaveTheURLOut(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	target := closed.URL + "/in?token=s3cret"
	closed.Close()
	c := NewClient(Options{AllowPrivate: true})
	_, err := call(t, c, Request{URL: target})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("closed port: %v", err)
	}
	if _, err := call(t, c, Request{Method: "GE T", URL: target}); err == nil || err.Error() != `invalid method "GE T"` {
		t.Errorf("bad method: %v", err)
	}
}

// Without AllowPrivate, no URL reaches a canary on loopback: literal
// addresses and http are refused before any dial (*URLError), and a public
// looking name that resolves to loopback, as a rebinding attacker's DNS
// answers, is refused at the dial (*BlockedError) naming the address.
func TestClientNeverReachesLoopback(t *testing.T) {
	t.Parallel()
	// The canary counts TCP connections, whatever speaks on them.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	tests := []struct {
		name    string
		url     string
		dns     string // what every name resolves to
		wantErr string
	}{
		{name: "literal", url: "https://127.0.0.1:" + port, wantErr: "url must point to a public address: 127.0.0.1 is a loopback address"},
		{name: "mapped literal", url: "https://[::ffff:127.0.0.1]:" + port, wantErr: "is a loopback address"},
		{name: "localhost", url: "https://localhost:" + port, wantErr: "localhost is a local name"},
		{name: "short form", url: "https://127.1:" + port, wantErr: "not an IP address in standard form"},
		{name: "plain http", url: "http://shop.example.com:" + port, wantErr: "url must use https"},
		{name: "rebound name", url: "https://shop.example.com:" + port, dns: "127.0.0.1", wantErr: "refused to connect to 127.0.0.1:" + port + ": 127.0.0.1 is a loopback address"},
		{name: "rebound name, mapped AAAA", url: "https://shop.example.com:" + port, dns: "::ffff:127.0.0.1", wantErr: "127.0.0.1 is a loopback address"}, // Go dials it as IPv4
		{name: "rebound name, AAAA", url: "https://shop.example.com/", dns: "fd00:ec2::254", wantErr: "refused to connect to [fd00:ec2::254]:443: fd00:ec2::254 is a private (unique local) address"},
		{name: "rebound to metadata", url: "https://shop.example.com/latest", dns: "169.254.169.254", wantErr: "169.254.169.254 is a cloud metadata address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := Options{}
			if tt.dns != "" {
				o.Resolver = answerAll(netip.MustParseAddr(tt.dns))
			}
			_, err := call(t, NewClient(o), Request{URL: tt.url})
			var ue *URLError
			var be *BlockedError
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || (tt.dns == "" && !errors.As(err, &ue)) || (tt.dns != "" && !errors.As(err, &be)) {
				t.Fatalf("Call(%s) = %v (%T), want %q", tt.url, err, err, tt.wantErr)
			}
		})
	}
	t.Cleanup(func() {
		if n := conns.Load(); n != 0 {
			t.Errorf("the canary on loopback got %d connections", n)
		}
	})
}

// With AllowPrivate (local development), the same rebound name is reached
// over plain http: the resolver really is the one dialing.
func TestClientAllowPrivateReachesLoopbackByName(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c := NewClient(Options{AllowPrivate: true, Resolver: answerAll(netip.MustParseAddr("127.0.0.1"))})
	if resp, err := call(t, c, Request{URL: "http://shop.example.com:" + port}); err != nil || resp.Status != http.StatusAccepted {
		t.Fatalf("Call = %+v, %v", resp, err)
	}
}

// answerAll is a Go resolver whose DNS server, in process over a pipe,
// answers every name with addr: an A record when addr is IPv4, AAAA when it
// is IPv6, and no record for the other type. It is the rebinding
// attacker's server without a network. The Go resolver frames queries over
// a stream conn as DNS over TCP (RFC 1035 §4.2.2): a two-byte length, then
// the message.
func answerAll(addr netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			var n [2]byte
			if _, err := io.ReadFull(server, n[:]); err != nil {
				return
			}
			q := make([]byte, binary.BigEndian.Uint16(n[:]))
			if _, err := io.ReadFull(server, q); err != nil || len(q) < 12 {
				return
			}
			end := 12 // the question's name: labels up to the root's zero
			for end < len(q) && q[end] != 0 {
				end += int(q[end]) + 1
			}
			end += 5 // the zero, type and class
			if end > len(q) {
				return
			}
			var rdata []byte
			switch qtype := binary.BigEndian.Uint16(q[end-4:]); {
			case qtype == 1 && addr.Is4():
				a := addr.As4()
				rdata = a[:]
			case qtype == 28 && addr.Is6():
				a := addr.As16()
				rdata = a[:]
			}
			// Header: the query's id, a response (authoritative, recursion
			// available, the query's RD bit), one question, no or one answer.
			resp := append([]byte{q[0], q[1], 0x84 | q[2]&0x01, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, q[12:end]...)
			if rdata != nil {
				resp[7] = 1
				resp = append(resp, 0xc0, 12) // the name: a pointer to the question's
				resp = append(resp, q[end-4:end]...)
				resp = append(resp, 0, 0, 0, 0, 0, byte(len(rdata))) // TTL 0: never cached
				resp = append(resp, rdata...)
			}
			_, _ = server.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...))
		}()
		return client, nil
	}}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
