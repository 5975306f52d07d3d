package telegramfake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func call(t *testing.T, url, contentType, body string) (int, map[string]any, error) {
	t.Helper()
	resp, err := http.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

func TestFakeAnswersAsTheBotAPI(t *testing.T) {
	t.Parallel()
	fake := &Server{Tokens: map[string]bool{"123:abc": true}}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	code, out, _ := call(t, srv.URL+"/bot123:abc/sendMessage", "application/json", `{"chat_id": 42, "text": "hi"}`)
	res, _ := out["result"].(map[string]any)
	if code != 200 || out["ok"] != true || res["message_id"] != float64(1) || res["text"] != "hi" || fake.LastMessageID() != "1" {
		t.Fatalf("sendMessage = %d %v (last id %s)", code, out, fake.LastMessageID())
	}
	if code, out, _ = call(t, srv.URL+"/bot999:zzz/sendMessage", "application/json", `{"chat_id": 42}`); code != 401 || out["error_code"] != float64(401) {
		t.Fatalf("unknown token = %d %v", code, out)
	}
	if code, out, _ = call(t, srv.URL+"/bot123:abc/sendMessage", "text/plain", `{"chat_id": 42}`); code != 400 || out["ok"] != false {
		t.Fatalf("body not declared JSON = %d %v", code, out)
	}
	fake.FailNext("sendMessage", 403, "Forbidden: bot was blocked by the user")
	if code, out, _ = call(t, srv.URL+"/bot123:abc/sendMessage", "application/json", `{"chat_id": 42}`); code != 403 || out["description"] != "Forbidden: bot was blocked by the user" {
		t.Fatalf("queued refusal = %d %v", code, out)
	}
	if code, _, _ = call(t, srv.URL+"/bot123:abc/sendMessage", "application/json", `{"chat_id": 42}`); code != 200 {
		t.Fatalf("a refusal is used once; next call = %d", code)
	}
	fake.SetFailure(&Failure{Status: 502, Body: "<html>Bad Gateway</html>"})
	for range 2 {
		if code, _, _ = call(t, srv.URL+"/bot123:abc/answerCallbackQuery", "application/json", `{}`); code != 502 {
			t.Fatalf("SetFailure: answer %d, want 502 on every call", code)
		}
	}
	fake.SetFailure(&Failure{Drop: true})
	if _, _, err := call(t, srv.URL+"/bot123:abc/sendMessage", "application/json", `{"chat_id": 42}`); err == nil {
		t.Fatal("Drop: the call got an answer")
	}
	fake.SetFailure(nil)
	if code, _, _ = call(t, srv.URL+"/bot123:abc/sendChatAction", "application/json", `{"chat_id": 42}`); code != 200 {
		t.Fatalf("after SetFailure(nil): %d", code)
	}
	calls := fake.Calls()
	if len(calls) != 7 || calls[0].Token != "123:abc" || calls[0].Method != "sendMessage" || calls[0].Params["chat_id"] != float64(42) {
		t.Fatalf("calls %+v", calls)
	}
}

func TestNoRecordStillAnswers(t *testing.T) {
	t.Parallel()
	fake := &Server{NoRecord: true}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for range 3 {
		if code, _, _ := call(t, srv.URL+"/bot1:a/sendMessage", "application/json", `{"chat_id": 1, "text": "x"}`); code != 200 {
			t.Fatalf("answer %d", code)
		}
	}
	if n := len(fake.Calls()); n != 0 || fake.LastMessageID() != "3" {
		t.Fatalf("%d calls recorded, last id %s; want none, 3", n, fake.LastMessageID())
	}
}

func TestStartServesUntilTheTestEnds(t *testing.T) {
	t.Parallel()
	fake, base := Start(t)
	if code, _, err := call(t, base+"/bot1:a/sendMessage", "application/json", `{"chat_id": 1}`); err != nil || code != 200 || len(fake.Calls()) != 1 {
		t.Fatalf("answer %d, %v, %d calls", code, err, len(fake.Calls()))
	}
}
