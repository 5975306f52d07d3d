package httpx_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
)

func TestDecodeJSONNamesTheField(t *testing.T) {
	t.Parallel()
	type body struct {
		Text  string   `json:"text"`
		Limit int      `json:"limit"`
		Tags  []string `json:"tags"`
	}
	tests := []struct {
		name    string
		give    string
		wantMsg string
	}{
		{"empty", ``, "must be a JSON object"},
		{"not json", `{"text": }`, "not valid JSON"},
		{"truncated", `{"text": "a"`, "not valid JSON"},
		{"wrong type", `{"text": 5}`, "text must be a string"},
		{"wrong array", `{"tags": "a"}`, "tags must be an array"},
		{"array body", `[1,2]`, "must be a JSON object"},
		{"two values", `{} {}`, "single JSON object"},
		{"a NUL", `{"text": "a\u0000b"}`, "NUL character (\\u0000) at byte 11"},
		{"a NUL after a backslash", `{"tags": ["ok", "\\\u0000"]}`, "NUL character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v body
			err := httpx.DecodeJSON(strings.NewReader(tt.give), &v)
			e, ok := errs.As(err)
			if !ok || e.Status != 400 || e.Code != errs.CodeInvalidRequest {
				t.Fatalf("err = %v, want 400 invalid_request", err)
			}
			if !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", e.Message, tt.wantMsg)
			}
		})
	}
	var ok body
	if err := httpx.DecodeJSON(strings.NewReader(`{"text":"hi","limit":3,"extra":true}`), &ok); err != nil || ok.Text != "hi" || ok.Limit != 3 {
		t.Fatalf("valid body: %v %+v", err, ok)
	}
}

// TestDecodeJSONOverTheLimitIs413: a valid body longer than the limit is
// 413 naming the limit, never "not valid JSON"; one at the limit decodes.
func TestDecodeJSONOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	const limit = 64
	atLimit := `{"text":"` + strings.Repeat("a", limit-len(`{"text":""}`)) + `"}`
	if len(atLimit) != limit {
		t.Fatalf("body of %d bytes", len(atLimit))
	}
	var v struct{ Text string }
	if err := httpx.DecodeJSONWithin(strings.NewReader(atLimit), limit, &v); err != nil || len(v.Text) != limit-11 {
		t.Fatalf("body at the limit: %v", err)
	}
	over := `{"text":"` + strings.Repeat("a", limit-len(`{"text":""}`)+1) + `"}`
	for name, r := range map[string]io.Reader{
		"plain":          strings.NewReader(over),
		"MaxBytesReader": http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(over)), limit),
	} {
		err := httpx.DecodeJSONWithin(r, limit, &v)
		e, ok := errs.As(err)
		if !ok || e.Status != http.StatusRequestEntityTooLarge || e.Code != "payload_too_large" || !strings.Contains(e.Message, "at most 64 bytes") {
			t.Fatalf("%s: one byte over the limit = %v, want 413 payload_too_large naming the limit", name, err)
		}
	}
	// DecodeJSON's own bound is what NATS carries by default.
	big := `{"text":"` + strings.Repeat("a", 600<<10) + `"}`
	if err := httpx.DecodeJSON(strings.NewReader(big), &v); err != nil {
		t.Fatalf("600 KB body: %v", err)
	}
	if err := httpx.DecodeJSON(strings.NewReader(`{"text":"`+strings.Repeat("a", httpx.MaxBodyBytes)+`"}`), &v); err == nil {
		t.Fatal("a body over MaxBodyBytes decoded")
	}
}

// A body whose read passed the listener's deadline is 408
// request_timeout; one that failed otherwise is 400 invalid_request.
func TestReadBodyThatFailsIs408OrIs400(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err        error
		status     int
		code, mean string
	}{
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, http.StatusRequestTimeout, errs.CodeRequestTimeout, "did not arrive in time"},
		{io.ErrUnexpectedEOF, http.StatusBadRequest, errs.CodeInvalidRequest, "could not be read"},
		{syscall.ECONNRESET, http.StatusBadRequest, errs.CodeInvalidRequest, "could not be read"},
	} {
		_, err := httpx.ReadBody(io.MultiReader(strings.NewReader(`{"a":`), iotest.ErrReader(tt.err)), 1<<10)
		e, ok := errs.As(err)
		if !ok || e.Status != tt.status || e.Code != tt.code || !strings.Contains(e.Message, tt.mean) {
			t.Errorf("a read failing with %v = %v, want %d %s", tt.err, err, tt.status, tt.code)
		}
	}
}

// TestOnlyUnmarshalJSONKeepsANUL: the text \u0000 (an escaped backslash, then
// u0000) is no NUL and decodes; UnmarshalJSON keeps a NUL that DecodeJSON
// refuses (TestDecodeJSONNamesTheField).
func TestOnlyUnmarshalJSONKeepsANUL(t *testing.T) {
	t.Parallel()
	var v struct {
		Text string `json:"text"`
	}
	if err := httpx.DecodeJSON(strings.NewReader(`{"text":"\\u0000"}`), &v); err != nil || v.Text != `\u0000` {
		t.Errorf("the text \\u0000: %q, %v", v.Text, err)
	}
	if err := httpx.UnmarshalJSON([]byte(`{"text":"a\u0000b"}`), &v); err != nil || v.Text != "a\x00b" {
		t.Errorf("UnmarshalJSON kept %q, %v; want the NUL", v.Text, err)
	}
}
