package rpc

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/parleyhq/parley/pkg/bufpool"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/testenv"
)

// Requests served at once, whose bodies and replies reuse buffers between
// requests (replyBuffers, bodyBuffers), each get their own body whole: of
// every size, from a few bytes to over the pool's bound, and as a stream.
func TestConcurrentRepliesKeepTheirOwnBodies(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	srv, err := NewServer(env.NATS(t), env.RPCPrefix, "buffers", "1.0.0", env.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	body := func(n int) []byte { return bytes.Repeat([]byte{byte('a' + n%26)}, n) }
	err = srv.Handle(EndpointAPI, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Size", strconv.Itoa(n))
		_, _ = w.Write(body(n))
		if r.URL.Query().Has("flush") {
			_ = http.NewResponseController(w).Flush()
			_, _ = w.Write(body(n))
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	client := NewClient(env.NATS(t), env.RPCPrefix)
	sizes := []int{1, 700, 17 * 1024, 40 * 1024, bufpool.MaxKept + 1}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 12 {
				n := sizes[(g+i)%len(sizes)] + g
				query := "n=" + strconv.Itoa(n)
				want := body(n)
				if i%3 == 0 {
					query += "&flush"
					want = append(want, want...)
				}
				resp, err := client.Do(context.Background(), "buffers", EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/", RawQuery: query})
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(resp.GetBody(), want) || header(resp, "X-Size") != strconv.Itoa(n) {
					t.Errorf("request %s: %d bytes %q..., X-Size %s", query, len(resp.GetBody()), prefix(resp.GetBody()), header(resp, "X-Size"))
					return
				}
			}
		})
	}
	wg.Wait()
}

func prefix(b []byte) string { return fmt.Sprintf("%.8s", b) }
