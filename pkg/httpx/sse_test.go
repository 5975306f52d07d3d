package httpx_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/httpx"
)

func TestEventBytesSplitsLines(t *testing.T) {
	t.Parallel()
	got := string(httpx.EventBytes("message", []byte("one\r\ntwo\nthree")))
	want := "event: message\ndata: one\ndata: two\ndata: three\n\n"
	if got != want {
		t.Fatalf("event = %q, want %q", got, want)
	}
}

// Each event reaches the client before the next is written: the stream is
// flushed per event, not buffered to the end.
func TestSSEFlushesEachEvent(t *testing.T) {
	t.Parallel()
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse := httpx.StartSSE(w)
		if err := sse.Event("first", []byte(`{"n":1}`)); err != nil {
			t.Error(err)
		}
		<-next
		if err := sse.Comment("ping"); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", resp.Header)
	}
	rd := bufio.NewReader(resp.Body)
	var first strings.Builder
	for first.Len() == 0 || !strings.HasSuffix(first.String(), "\n\n") {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the first event: %v (got %q)", err, first.String())
		}
		first.WriteString(line)
	}
	if first.String() != "event: first\ndata: {\"n\":1}\n\n" {
		t.Fatalf("first event %q", first.String())
	}
	close(next)
	rest, err := io.ReadAll(rd)
	if err != nil || string(rest) != ": ping\n\n" {
		t.Fatalf("rest = %q, %v", rest, err)
	}
}
