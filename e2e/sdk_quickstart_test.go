package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/lines"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

// quickstartFlow greets the input's name.
const quickstartFlow = `{
  "name": "Welcome",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "hi"},
    {"id": "hi", "type": "send_message", "message": {"type": "text", "text": "Hi {{vars.input.name}}, how can we help?"}, "next": "done"},
    {"id": "done", "type": "end", "output": {"greeted": "{{vars.input.name}}"}}
  ]
}`

// runExample runs `go run ./<dir> args...` in docs/examples with env added
// to the test's environment, until t ends.
func runExample(t *testing.T, dir string, env []string, args ...string) *lines.Program {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "./" + dir}, args...)...)
	cmd.Dir = filepath.Join("..", "docs", "examples")
	cmd.Env = append(os.Environ(), env...)
	return lines.Start(t, cmd)
}

// expectLine reads p's next line, which must match pattern, and returns
// the pattern's groups. The first line comes once go run has compiled the
// program, which takes a while on a loaded machine.
func expectLine(t *testing.T, p *lines.Program, pattern string) []string {
	t.Helper()
	line := p.Next(t, 3*time.Minute)
	m := regexp.MustCompile(pattern).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the program printed\n%s\nwant a line matching\n%s", line, pattern)
	}
	return m[1:]
}

// TestQuickstartExample runs docs/examples/quickstart, a program that
// imports only the Go client, against the built services: its reply
// reaches the customer on Telegram once and is stored; its invoke and its
// streamed invoke are two completed runs in the run store, each as it
// printed; and its webhook, saved with PUT /v1/webhook, prints the
// customer's next message and the test event, verified.
func TestQuickstartExample(t *testing.T) {
	t.Parallel()
	bot, botAPI := telegramfake.Start(t)
	s := startSuite(t, "TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")
	ws, key := s.workspaceWithKey(t, "Quickstart", "developer_api,flows")
	ch := s.addChannel(t, ws, "external", "--kind", "telegram", "--token", "700100400:AAH-quickstart-e2e-token")
	flowID := s.publishFlow(t, ws, quickstartFlow)
	ingress := s.messagingURL + "/ingress/telegram/" + ch.ID
	postUpdate(t, ingress, ch.Secret, telegramMessage(1, 4242, "Ada", "Where is my order?"))
	conv := s.onlyConversation(t, key)
	listen := fmt.Sprintf("127.0.0.1:%d", ports.Free(t, 1)[0])
	secret := s.saveWebhook(t, key, "http://"+listen+"/parley")

	const reply = "Your order ships today."
	p := runExample(t, "quickstart",
		[]string{"PARLEY_API_KEY=" + key, "PARLEY_BASE_URL=" + s.gatewayURL, "PARLEY_WEBHOOK_SECRET=" + secret},
		"-conversation", conv, "-flow", flowID, "-input", `{"name": "Ada"}`, "-reply", reply, "-listen", listen)

	// The reply: one sendMessage to Ada's chat, stored as the newest
	// message under the id the program printed.
	sent := expectLine(t, p, `^sent message (\S+) \((\S+) on the platform\)$`)
	sends := 0
	for _, c := range bot.Calls() {
		if c.Method == "sendMessage" && c.Params["text"] == reply && c.Params["chat_id"] == float64(4242) {
			sends++
		}
	}
	if sends != 1 {
		t.Fatalf("Telegram received %d sends of the reply, want 1: %+v", sends, bot.Calls())
	}
	_, _, stored := s.api(t, key, http.MethodGet, "/v1/conversations/"+conv+"/messages?limit=1", nil)
	if newest := stored["messages"].([]any)[0].(map[string]any); newest["id"] != sent[0] || newest["external_id"] != sent[1] ||
		newest["content"] != reply || newest["sender"] != "user" {
		t.Fatalf("the newest stored message = %v, want the printed %v", newest, sent)
	}

	// The invoke, then the stream: two runs, each stored as it printed.
	invoked := expectLine(t, p, `^run (\S+): completed$`)[0]
	expectLine(t, p, `^  says "Hi Ada, how can we help\?"$`)
	streamed := expectLine(t, p, `^stream: run (\S+) started$`)[0]
	expectLine(t, p, `^stream: node start \(start\)$`)
	expectLine(t, p, `^stream: node hi \(send_message\)$`)
	expectLine(t, p, `^stream: says "Hi Ada, how can we help\?"$`)
	expectLine(t, p, `^stream: node done \(end\)$`)
	expectLine(t, p, `^stream: completed$`)
	if n := s.runsStored(t, flowID); n != 2 || invoked == streamed {
		t.Fatalf("%d runs stored, printed %s and %s; want two runs", n, invoked, streamed)
	}
	for _, runID := range []string{invoked, streamed} {
		run := s.runTrace(t, key, "/v1/flows/"+flowID, runID)["run"].(map[string]any)
		if run["status"] != "completed" || fmt.Sprint(run["output"]) != "map[greeted:Ada]" {
			t.Fatalf("run %s stored as %v", runID, run)
		}
	}

	// The webhook: the customer's next message, then the test event, each
	// verified and printed once.
	expectLine(t, p, `^listening on `+regexp.QuoteMeta(listen)+`$`)
	postUpdate(t, ingress, ch.Secret, telegramMessage(2, 4242, "Ada", "Thanks!"))
	expectLine(t, p, `^message\.received in `+conv+`: Ada wrote "Thanks!"$`)
	status, _, out := s.api(t, key, http.MethodPost, "/v1/webhook/test", nil)
	d, _ := out["delivery"].(map[string]any)
	if status != http.StatusOK || d["status"] != "delivered" || d["response_status"] != float64(http.StatusOK) {
		t.Fatalf("POST /v1/webhook/test = %d %v", status, out)
	}
	expectLine(t, p, `^test `+regexp.QuoteMeta(fmt.Sprint(d["id"]))+`$`)
}
