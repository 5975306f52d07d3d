package webhookhttp

import (
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/sdk/go/webhook"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// A canary listens on loopback; with private targets off, no spelling of
// its address reaches it.
func TestSenderNeverReachesLoopbackWhenPrivateTargetsOff(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	canary := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(canary.Close)
	_, port, _ := net.SplitHostPort(canary.Listener.Addr().String())

	s := New(Options{UserAgent: "Parley-Webhooks/test"})
	for _, target := range []string{
		"https://127.0.0.1:" + port + "/hook",
		"https://localhost:" + port + "/hook", // a name resolving to loopback (the DNS-rebinding case)
		"https://[::ffff:127.0.0.1]:" + port + "/hook",
		"https://[::1]:" + port + "/hook",
		"http://127.0.0.1:" + port + "/hook", // plain http is refused before dialing
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res := s.Send(ctx, delivery.Request{URL: target, Secret: "whsec_x", Event: "test", DeliveryID: "d", Body: []byte(`{}`)})
		cancel()
		if res.Status != 0 || !strings.Contains(res.Error, "refused") {
			t.Errorf("Send(%s) = %+v, want refused", target, res)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the canary received %d requests", n)
	}
}

func TestSenderRequest(t *testing.T) {
	t.Parallel()
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body = make([]byte, r.ContentLength)
		_, _ = r.Body.Read(body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	at := time.Unix(1795348800, 0)
	s := New(Options{AllowPrivateTargets: true, UserAgent: "Parley-Webhooks/9.9.9", Clock: func() time.Time { return at }})
	payload := []byte(`{"id":"d1","event":"test"}`)
	res := s.Send(context.Background(), delivery.Request{URL: srv.URL + "/in?x=1", Secret: "whsec_k", Event: "test", DeliveryID: "d1", Body: payload})
	if res.Status != 204 || res.Error != "" {
		t.Fatalf("Send = %+v", res)
	}
	want := map[string]string{
		"Content-Type":          "application/json",
		"User-Agent":            "Parley-Webhooks/9.9.9",
		webhook.HeaderEvent:     "test",
		webhook.HeaderDelivery:  "d1",
		webhook.HeaderTimestamp: strconv.FormatInt(at.Unix(), 10),
		webhook.HeaderSignature: webhook.Sign("whsec_k", at.Unix(), payload),
		"Accept-Encoding":       "",
	}
	for k, v := range want {
		if g := got.Header.Get(k); g != v {
			t.Errorf("header %s = %q, want %q", k, g, v)
		}
	}
	if got.Method != http.MethodPost || got.URL.RequestURI() != "/in?x=1" || string(body) != string(payload) {
		t.Errorf("request %s %s body %s", got.Method, got.URL, body)
	}
}

func TestSenderFailures(t *testing.T) {
	t.Parallel()
	var redirectedTo atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) { redirectedTo.Add(1) })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("x", 32<<10))
		for range 64 { // 2 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusBadGateway)
		// The status goes out before the bomb is compressed: on a loaded
		// machine under -race compressing 10 MiB can outlast the attempt,
		// and this case is about the body, not a slow receiver.
		w.(http.Flusher).Flush()
		zw := gzip.NewWriter(w)
		_, _ = zw.Write([]byte(strings.Repeat("0", 10<<20)))
		_ = zw.Close()
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("bad\x00\xff\xfe request\r\n"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for range 100 {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := New(Options{AllowPrivateTargets: true, UserAgent: "Parley-Webhooks/test"})
	send := func(path string, timeout time.Duration) delivery.Result {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return s.Send(ctx, delivery.Request{URL: srv.URL + path, Secret: "k", Event: "test", DeliveryID: "d", Body: []byte(`{}`)})
	}

	res := send("/redirect", 5*time.Second)
	if res.Status != http.StatusTemporaryRedirect || !strings.Contains(res.Error, "redirects are not followed") || !strings.Contains(res.Error, "/target") {
		t.Errorf("redirect: %+v", res)
	}
	if redirectedTo.Load() != 0 {
		t.Error("the redirect was followed")
	}

	res = send("/huge", 5*time.Second)
	if res.Status != 500 || !strings.HasPrefix(res.Error, "receiver answered 500: xxx") || len(res.Error) > errorBodyChars+64 {
		t.Errorf("huge body: status %d, error of %d bytes", res.Status, len(res.Error))
	}

	res = send("/gzip", 5*time.Second)
	if res.Status != 502 || len(res.Error) > errorBodyChars+64 {
		t.Errorf("gzip body: status %d, error of %d bytes", res.Status, len(res.Error))
	}

	res = send("/binary", 5*time.Second)
	if res.Status != 400 || strings.ContainsAny(res.Error, "\x00\r") || !strings.Contains(res.Error, "bad") {
		t.Errorf("binary body: %+v", res)
	}

	start := time.Now()
	res = send("/slow", 300*time.Millisecond)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a one-byte-at-a-time body held the attempt for %s", took)
	}
	if res.Status != 200 || res.Error != "" {
		t.Errorf("slow 200: %+v (the answer was given before the body dragged on)", res)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res = s.Send(ctx, delivery.Request{URL: url, Secret: "k", Event: "test", DeliveryID: "d", Body: []byte(`{}`)})
	if res.Status != 0 || !strings.Contains(res.Error, "connection refused") || strings.Contains(res.Error, "Post \"") {
		t.Errorf("closed port: %+v", res)
	}
}

// TestSenderReadsAtMost64KiBOfHeaders: a receiver's answer is read only
// up to 64 KiB of headers (docs/webhooks.md "Answering a delivery"): past
// that the attempt fails with no status, rather than the dispatcher
// holding whatever a hostile receiver sends; headers within it are read.
func TestSenderReadsAtMost64KiBOfHeaders(t *testing.T) {
	t.Parallel()
	headers := func(kib int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			value := strings.Repeat("v", 1<<10)
			for i := range kib {
				w.Header().Set(fmt.Sprintf("X-Padding-%d", i), value)
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/within", headers(48))
	mux.HandleFunc("/over", headers(80))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := New(Options{AllowPrivateTargets: true, UserAgent: "Parley-Webhooks/test"})
	send := func(path string) delivery.Result {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return s.Send(ctx, delivery.Request{URL: srv.URL + path, Secret: "k", Event: "test", DeliveryID: "d", Body: []byte(`{}`)})
	}
	if res := send("/within"); res.Status != http.StatusNoContent || res.Error != "" {
		t.Errorf("48 KiB of headers: %+v, want the 204 read", res)
	}
	if res := send("/over"); res.Status != 0 || !strings.Contains(res.Error, "65536 bytes") {
		t.Errorf("80 KiB of headers: %+v, want a failed attempt with no status", res)
	}
}
