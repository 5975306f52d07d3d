package httpx_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/httpx"
)

func TestCallFailureHidesTheURL(t *testing.T) {
	t.Parallel()
	client := &http.Client{Timeout: time.Second}
	_, err := client.Get("http://127.0.0.1:9/bot123:SECRET-TOKEN/sendMessage?access_token=EAAG")
	if err == nil {
		t.Fatal("a call to the discard port succeeded")
	}
	got := httpx.CallFailure(context.Background(), err)
	if strings.Contains(got, "SECRET") || strings.Contains(got, "EAAG") || got == "" {
		t.Fatalf("CallFailure = %q: leaks the URL or says nothing", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := httpx.CallFailure(ctx, errors.New("whatever")); got != "no answer in time" {
		t.Fatalf("cancelled call = %q", got)
	}
}
