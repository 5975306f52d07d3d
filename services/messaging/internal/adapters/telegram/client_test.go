package telegram

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

func TestClientSendTextAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		body     string
		wantID   string
		wantCode int
		wantDesc string
	}{
		{"ok", 200, `{"ok":true,"result":{"message_id":42,"chat":{"id":7,"type":"private"},"date":1768471200,"text":"hi"}}`, "42", 0, ""},
		{"refused", 400, `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`, "", 400, "Bad Request: chat not found"},
		{"refused without description", 401, `{"ok":false}`, "", 401, "HTTP 401"},
		{"not json", 502, `<html>bad gateway</html>`, "", 502, "HTTP 502"},
		{"result of the wrong shape", 200, `{"ok":true,"result":true}`, "", 0, "sendMessage result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/bot7:tok/sendMessage" {
					t.Errorf("path = %s", r.URL.Path)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			c := NewClient(srv.URL+"/", srv.Client())
			to := conversation.Target{Channel: channel.Channel{Token: "7:tok"}, Conversation: conversation.Conversation{ReplyTo: "7"}}
			sent, err := c.SendText(context.Background(), to, conversation.OutboundText{Text: "hi"})
			if tt.wantDesc == "" {
				if err != nil || sent.ExternalID != tt.wantID {
					t.Fatalf("SendText = %+v, %v", sent, err)
				}
				return
			}
			var pe *conversation.PlatformError
			if !errors.As(err, &pe) || pe.Code != tt.wantCode || !strings.Contains(pe.Description, tt.wantDesc) || pe.Platform != channel.KindTelegram {
				t.Fatalf("err = %#v", err)
			}
		})
	}
}

func TestClientUnreachableHidesToken(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	url := srv.URL
	srv.Close()
	c := NewClient(url, &http.Client{Timeout: time.Second})
	to := conversation.Target{Channel: channel.Channel{Token: "7:very-secret"}, Conversation: conversation.Conversation{ReplyTo: "@shop"}}
	_, err := c.SendText(context.Background(), to, conversation.OutboundText{Text: "hi"})
	var pe *conversation.PlatformError
	if !errors.As(err, &pe) || !strings.Contains(pe.Description, "could not be reached") || strings.Contains(err.Error(), "very-secret") {
		t.Fatalf("err = %v", err)
	}
}

func TestChatID(t *testing.T) {
	t.Parallel()
	if v, ok := chatID("-1001234567890").(int64); !ok || v != -1001234567890 {
		t.Fatalf("numeric chat id = %#v", chatID("-1001234567890"))
	}
	if v, ok := chatID("@shopchannel").(string); !ok || v != "@shopchannel" {
		t.Fatalf("username chat id = %#v", chatID("@shopchannel"))
	}
}

func TestClientAnswerButton(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		body     string
		wantDesc string
	}{
		{"answered", 200, `{"ok":true,"result":true}`, ""},
		{"too old", 400, `{"ok":false,"error_code":400,"description":"Bad Request: query is too old and response timeout expired or query ID is invalid"}`, "query is too old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				got = r.URL.Path + " " + r.Header.Get("Content-Type") + " " + string(raw)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			c := NewClient(srv.URL, srv.Client())
			err := c.AnswerButton(context.Background(), channel.Channel{Token: "7:tok"}, "4382bfdwdsb323b2d9")
			if want := `/bot7:tok/answerCallbackQuery application/json {"callback_query_id":"4382bfdwdsb323b2d9"}`; got != want {
				t.Fatalf("request = %s, want %s", got, want)
			}
			if tt.wantDesc == "" {
				if err != nil {
					t.Fatalf("AnswerButton = %v", err)
				}
				return
			}
			var pe *conversation.PlatformError
			if !errors.As(err, &pe) || pe.Code != 400 || !strings.Contains(pe.Description, tt.wantDesc) {
				t.Fatalf("err = %#v", err)
			}
		})
	}
}
