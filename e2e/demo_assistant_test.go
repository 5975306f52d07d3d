package e2e

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDemoAssistantInTheBrowser plays the step of the README's quick start
// (README.md "Quick start") that asks the built-in AI, as make run sets it
// up: the llm-sandbox as the
// provider and as the guard, parleyctl demo; a visitor opens the demo
// webchat widget in Chromium, asks about the demo shop's return policy, and
// reads the assistant's answer, quoted from the policy's passage, which is
// stored with sender ai. A demo run again hands a webchat switched to
// suggest back to the assistant.
func TestDemoAssistantInTheBrowser(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	llm := startLLMSandbox(t)
	s := startSuite(t, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "LLM_BASE_URL="+llm, "LLM_MODEL=sandbox", "LLM_PRICES=sandbox=0/0",
		"GUARD_BASE_URL="+llm)
	type demoOut struct {
		APIKey     string `json:"api_key"`
		WebchatURL string `json:"webchat_url"`
		Channels   []struct {
			ID     string `json:"id"`
			Kind   string `json:"kind"`
			AIMode string `json:"ai_mode"`
		} `json:"channels"`
	}
	var demo, again demoOut
	s.ctl(t, &demo, "demo")
	if len(demo.Channels) != 2 || demo.Channels[1].Kind != "webchat" || demo.Channels[1].AIMode != "auto" || demo.WebchatURL == "" {
		t.Fatalf("demo printed %+v; want the webchat channel in mode auto", demo)
	}
	webchat := demo.Channels[1].ID
	// An operator tried suggest mode; the next demo hands it back.
	s.ctl(t, nil, "channel", "set-mode", "--channel", webchat, "--mode", "suggest")
	s.ctl(t, &again, "demo")
	if again.Channels[1].ID != webchat || again.Channels[1].AIMode != "auto" {
		t.Fatalf("demo again printed %+v; want the same webchat channel back in mode auto", again)
	}

	askDemoAssistant(t, demo.WebchatURL)

	// The answer is stored in the conversation, sent by the AI.
	status, _, convs := s.api(t, demo.APIKey, http.MethodGet, "/v1/conversations?platform=webchat", nil)
	list, _ := convs["conversations"].([]any)
	if status != http.StatusOK || len(list) != 1 {
		t.Fatalf("GET /v1/conversations = %d %v", status, convs)
	}
	conv := list[0].(map[string]any)["id"].(string)
	status, _, page := s.api(t, demo.APIKey, http.MethodGet, "/v1/conversations/"+conv+"/messages", nil)
	msgs, _ := page["messages"].([]any)
	if status != http.StatusOK || len(msgs) != 2 {
		t.Fatalf("GET /v1/conversations/%s/messages = %d %v", conv, status, page)
	}
	answer, asked := msgs[0].(map[string]any), msgs[1].(map[string]any) // newest first
	if answer["sender"] != "ai" || answer["content"] != demoAnswer || asked["sender"] != "contact" || asked["content"] != demoQuestion {
		t.Fatalf("messages %v; want the question, then the ai's answer %q", msgs, demoAnswer)
	}
}

// The README's question to the demo assistant, and the llm-sandbox's
// answer from the demo shop's policy.
const (
	demoQuestion = "How long do I have to return an item?"
	demoAnswer   = "[sandbox] From Demo shop policy › Returns: You can return an item within 30 days of delivery for a full refund."
)

// askDemoAssistant opens the demo webchat widget at widgetURL in Chromium,
// asks demoQuestion and waits for demoAnswer, sent by the AI.
func askDemoAssistant(t *testing.T, widgetURL string) {
	t.Helper()
	b := newBrowser(t)
	b.run(t, chromedp.Navigate(widgetURL), chromedp.WaitVisible(chromedp.CSS(".status.online")))
	b.run(t, chromedp.SendKeys(chromedp.CSS("#input"), demoQuestion), chromedp.Click(chromedp.CSS("#send")))
	dom := b.waitDOM(t, "the assistant's answer", func(d widgetDOM) bool {
		return len(d.Messages) == 2 && d.Messages[1].Sender != "contact"
	})
	if got := dom.Messages[1]; got.Text != demoAnswer || got.Sender != "ai" || dom.Messages[0].Text != demoQuestion {
		t.Fatalf("the widget shows %+v; want the question, then the ai's answer %q", dom.Messages, demoAnswer)
	}
	b.screenshot(t, "demo-assistant")
	b.checkConsole(t)
}
