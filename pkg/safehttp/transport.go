package safehttp

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/parleyhq/parley/pkg/bytesize"
)

// Bounds every transport built here applies, whoever the caller is.
const (
	// DialTimeout bounds one connection's dial.
	DialTimeout = 10 * time.Second
	// MaxResponseHeader bounds the response headers a server may send.
	MaxResponseHeader = 64 << 10
	// DefaultIdleConnsPerHost is Options.IdleConnsPerHost's default.
	DefaultIdleConnsPerHost = 16
)

// Options configure the dialers, transports and clients built here.
type Options struct {
	// AllowPrivate lets calls use plain http and reach loopback, private
	// and other special addresses (WEBHOOK_ALLOW_PRIVATE_TARGETS): local
	// development and tests only. The other rules still hold.
	AllowPrivate bool
	// Resolver looks up host names; the system's when nil. The guard
	// judges whatever address it returns, so a test may point it at a
	// fake DNS server without weakening anything.
	Resolver *net.Resolver
	// IdleConnsPerHost is how many kept-alive connections to one host are
	// kept for reuse; DefaultIdleConnsPerHost when zero. A caller that
	// runs many calls to one host at once (the webhook dispatcher) sizes
	// it to that, so a busy host is never dialed again for lack of an
	// idle connection.
	IdleConnsPerHost int
	// UserAgent is sent by Client when a call sets none.
	UserAgent string
}

// DialControl is a net.Dialer's Control that refuses special addresses. It
// runs on the address actually being dialed, after DNS resolution, so a
// name cannot resolve around it (DNS rebinding), and it refuses anything
// but TCP. The refusal is a *BlockedError.
func DialControl(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp4", "tcp6":
	default:
		return &BlockedError{Address: address, Reason: "network " + network + " is not allowed"}
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return &BlockedError{Address: address, Reason: "not an IP address"}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return &BlockedError{Address: address, Reason: "not an IP address"}
	}
	if err := CheckAddr(ip); err != nil {
		return &BlockedError{Address: address, Reason: err.Error()}
	}
	return nil
}

// BlockedError is a dial DialControl refused. Its message names the
// address and why ("refused to connect to 127.0.0.1:443: 127.0.0.1 is a
// loopback address"), which developers see as is.
type BlockedError struct {
	Address string
	Reason  string
}

func (e *BlockedError) Error() string {
	return "refused to connect to " + e.Address + ": " + e.Reason
}

// NewDialer returns a dialer guarded by DialControl unless o.AllowPrivate.
func NewDialer(o Options) *net.Dialer {
	d := &net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second, Resolver: o.Resolver}
	if !o.AllowPrivate {
		d.Control = DialControl
	}
	return d
}

// NewTransport returns a transport over NewDialer with its own connection
// pool. It uses no proxy from the environment (the proxy would dial for
// us, unguarded), never decompresses (bodies are read as sent, capped),
// and bounds response headers by MaxResponseHeader.
func NewTransport(o Options) *http.Transport {
	idlePerHost := o.IdleConnsPerHost
	if idlePerHost <= 0 {
		idlePerHost = DefaultIdleConnsPerHost
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            NewDialer(o).DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           max(512, idlePerHost),
		MaxIdleConnsPerHost:    idlePerHost,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: MaxResponseHeader,
		DisableCompression:     true,
	}
}

// NewHTTPClient returns an *http.Client over NewTransport that never
// follows a redirect: the 3xx response is what Do returns, for the caller
// to treat as an answer (and, for webhooks and flows, a failure). Following
// it would let any public server send us to any address. It sets no
// timeout: callers bound each request with its context.
func NewHTTPClient(o Options) *http.Client {
	return &http.Client{
		Transport: NewTransport(o),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// TooLargeError is a body longer than ReadCapped's limit.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("response body is larger than %s", bytesize.Size(e.Limit))
}

// ReadCapped reads r to its end, but never more than limit bytes: a longer
// body gives its first limit bytes and a *TooLargeError, so a server cannot
// make us hold more than we chose to. A read error gives what was read and
// that error.
func ReadCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > limit {
		return b[:limit], &TooLargeError{Limit: limit}
	}
	return b, nil
}
