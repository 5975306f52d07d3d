package receiver

import (
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/sdk/go/webhook"
)

// A recorded request verifies as the webhook package says: what the
// tests accept is what a developer's receiver accepts.
func TestRequestVerify(t *testing.T) {
	t.Parallel()
	r := New(t, nil)
	body := []byte(`{"id":"d1"}`)
	now := time.Now()
	req, err := http.NewRequest(http.MethodPost, r.URL, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, webhook.Sign("whsec_a", now.Unix(), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := r.Requests()
	if len(got) != 1 {
		t.Fatalf("%d requests recorded, want 1", len(got))
	}
	if err := got[0].Verify("whsec_a", now); err != nil {
		t.Errorf("Verify = %v, want nil", err)
	}
	if err := got[0].Verify("whsec_b", now); !errors.Is(err, webhook.ErrSignature) {
		t.Errorf("Verify with another secret = %v, want webhook.ErrSignature", err)
	}
	if err := got[0].Verify("whsec_a", now.Add(webhook.Tolerance+time.Second)); !errors.Is(err, webhook.ErrTimestamp) {
		t.Errorf("Verify 301 s later = %v, want webhook.ErrTimestamp", err)
	}
}

func post(t *testing.T, url, event, delivery string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"id":"`+delivery+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Service-Event", event)
	req.Header.Set("X-Service-Delivery", delivery)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestReceiverRecordsAnswersAndWaits(t *testing.T) {
	t.Parallel()
	r := New(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	if !strings.HasSuffix(r.URL, Path) {
		t.Fatalf("URL %q does not end in %s", r.URL, Path)
	}
	go func() {
		post(t, r.URL+"?x=1", "message.received", "d1")
		post(t, r.URL, "message.received", "d1")
		post(t, r.URL, "test", "d2")
	}()
	first := r.WaitFor(t, "test")
	if first.Delivery() != "d2" || string(first.Body) != `{"id":"d2"}` || first.Method != http.MethodPost {
		t.Fatalf("WaitFor(test) = %+v", first)
	}
	got := r.Wait(t, 3)
	if got[0].Path != Path+"?x=1" || got[0].At.IsZero() {
		t.Errorf("first request %+v", got[0])
	}
	if n := r.Count("message.received"); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	if n := r.Distinct(); n != 2 {
		t.Errorf("Distinct = %d, want 2", n)
	}
	if d1 := OfDelivery(got, "d1"); len(d1) != 2 || d1[0].Path != Path+"?x=1" || d1[1].Path != Path {
		t.Errorf("OfDelivery(d1) = %+v, want the first two requests", d1)
	}
	if code := post(t, r.URL, "x", "d3"); code != http.StatusNoContent {
		t.Errorf("4th answer %d, want 204", code)
	}
	r.Forget()
	if n := len(r.Requests()); n != 0 {
		t.Errorf("%d requests after Forget", n)
	}
}

func TestReceiverStatusCanChange(t *testing.T) {
	t.Parallel()
	r := New(t, nil)
	if code := post(t, r.URL, "test", "d1"); code != http.StatusOK {
		t.Fatalf("default answer %d, want 200", code)
	}
	r.SetStatus(http.StatusGone)
	if code := post(t, r.URL, "test", "d2"); code != http.StatusGone {
		t.Fatalf("answer %d after SetStatus(410)", code)
	}
}

func TestHoldKeepsRequestsInFlightUntilRelease(t *testing.T) {
	t.Parallel()
	r := New(t, Status(http.StatusOK))
	hold := r.Hold()
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); post(t, r.URL, "test", "h"+strconv.Itoa(i)) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.Waiting() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests held, want 3", r.Waiting())
		}
		time.Sleep(time.Millisecond)
	}
	for _, req := range r.Requests() {
		if req.HeldIn != hold {
			t.Errorf("request %s HeldIn %d, want %d", req.Delivery(), req.HeldIn, hold)
		}
	}
	r.Release()
	wg.Wait()
	if r.Waiting() != 0 {
		t.Errorf("%d still held after Release", r.Waiting())
	}
	post(t, r.URL, "test", "after")
	if last := r.Requests()[3]; last.HeldIn != 0 {
		t.Errorf("request after Release HeldIn %d", last.HeldIn)
	}
}

func TestDiscardKeepsNothingButCallsOnRequest(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	r := New(t, nil, Discard(), OnRequest(func(req Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, req.Delivery())
	}))
	post(t, r.URL, "test", "d1")
	post(t, r.URL, "test", "d2")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "d1" || len(r.Requests()) != 0 {
		t.Fatalf("OnRequest saw %v, recorded %d", seen, len(r.Requests()))
	}
}

// failure is a testing.TB that records Fatalf and ends the goroutine, as
// the real one does.
type failure struct {
	testing.TB
	msg chan string
}

func (f *failure) Helper() {}

func (f *failure) Fatalf(format string, args ...any) {
	f.msg <- format
	runtime.Goexit()
}

func TestWithinBoundsTheWait(t *testing.T) {
	t.Parallel()
	r := New(t, nil, Within(30*time.Millisecond))
	f := &failure{TB: t, msg: make(chan string, 1)}
	start := time.Now()
	go r.Wait(f, 1)
	select {
	case <-f.msg:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not give up")
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 3*time.Second {
		t.Fatalf("gave up after %s, want about 30ms", d)
	}
}
