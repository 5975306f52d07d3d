package httpx_test

import (
	"strings"
	"testing"

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
