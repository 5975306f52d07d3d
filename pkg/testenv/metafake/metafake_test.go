package metafake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func do(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

func TestFakeAnswersAsTheGraphAPI(t *testing.T) {
	t.Parallel()
	fake := New()
	srv := httptest.NewServer(fake)
	defer srv.Close()

	code, out := do(t, http.MethodPost, srv.URL+"/v21.0/me/messages?access_token=tok", `{"recipient":{"id":"psid-1"},"message":{"text":"hi"}}`)
	if code != 200 || out["recipient_id"] != "psid-1" || !strings.HasPrefix(out["message_id"].(string), "m_fake_") {
		t.Fatalf("send = %d %v", code, out)
	}
	if code, out = do(t, http.MethodPost, srv.URL+"/me/messages", `{}`); code != 400 || out["error"].(map[string]any)["code"] != float64(104) {
		t.Fatalf("no token = %d %v", code, out)
	}
	fake.SetCommenter("c1", "psid-ada")
	if _, out = do(t, http.MethodPost, srv.URL+"/me/messages?access_token=tok", `{"recipient":{"comment_id":"c1"}}`); out["recipient_id"] != "psid-ada" {
		t.Fatalf("private reply recipient %v", out)
	}
	if _, out = do(t, http.MethodPost, srv.URL+"/me/messages?access_token=tok", `{"recipient":{"comment_id":"c2"}}`); out["recipient_id"] != "psid-of-c2" {
		t.Fatalf("private reply to an unknown commenter %v", out)
	}
	fake.SetProfile("psid-1", Profile{ID: "psid-1", FirstName: "Ada"})
	if code, out = do(t, http.MethodGet, srv.URL+"/psid-1?fields=first_name&access_token=tok", ""); code != 200 || out["first_name"] != "Ada" || out["id"] != "psid-1" {
		t.Fatalf("profile = %d %v", code, out)
	}
	fake.FailNext("/me/messages", GraphError{Status: 400, Message: "(#10) outside", Type: "OAuthException", Code: 10, Subcode: 2018278, FBTrace: "AbC"})
	code, out = do(t, http.MethodPost, srv.URL+"/me/messages?access_token=tok", `{"recipient":{"id":"psid-1"}}`)
	if e, _ := out["error"].(map[string]any); code != 400 || e["error_subcode"] != float64(2018278) || e["fbtrace_id"] != "AbC" {
		t.Fatalf("refusal = %d %v", code, out)
	}
	calls := fake.CallsTo("/psid-1")
	if len(calls) != 1 || calls[0].Query.Get("fields") != "first_name" || calls[0].AccessToken != "tok" {
		t.Fatalf("profile reads %+v", calls)
	}
}

func TestHoldKeepsCallsInFlightUntilReleased(t *testing.T) {
	t.Parallel()
	fake := New()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	release := fake.Hold()
	done := make(chan int)
	go func() {
		code, _ := do(t, http.MethodPost, srv.URL+"/c1/comments?access_token=tok", `{"message":"hi"}`)
		done <- code
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(fake.Calls()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("call never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("answered while held")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	release() // a second release is harmless
	if code := <-done; code != 200 {
		t.Fatalf("answer after release %d", code)
	}
}

func TestSignIsMetasHeader(t *testing.T) {
	t.Parallel()
	// printf '{}' | openssl dgst -sha256 -hmac secret
	const want = "sha256=77325902caca812dc259733aacd046b73817372c777b8d95b402647474516e13"
	if got := Sign("secret", []byte("{}")); got != want {
		t.Fatalf("Sign = %q", got)
	}
}

func TestStartServesUntilTheTestEnds(t *testing.T) {
	t.Parallel()
	fake, base := Start(t)
	if code, _ := do(t, http.MethodPost, base+"/v21.0/me/messages?access_token=tok", `{"recipient":{"id":"p"}}`); code != 200 || len(fake.CallsTo("/me/messages")) != 1 {
		t.Fatalf("answer %d, calls %+v", code, fake.Calls())
	}
}
