package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

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

// program is a Go program of docs/examples started with go run, its
// output read a line at a time.
type program struct {
	lines  chan string
	stderr *lockedBuffer
}

// runExample runs `go run ./<dir> args...` in docs/examples with env added
// to the test's environment, and stops it (go run's child too) when t
// ends.
func runExample(t *testing.T, dir string, env []string, args ...string) *program {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "./" + dir}, args...)...)
	cmd.Dir = filepath.Join("..", "docs", "examples")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &program{lines: make(chan string, 256), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("go run ./%s: %v", dir, err)
	}
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("--- go run ./%s stderr ---\n%s", dir, p.stderr.String())
		}
	})
	return p
}

// expect reads the program's next line, which must match pattern, and
// returns the pattern's groups. The first line comes once go run has
// compiled the program, which takes a while on a loaded machine.
func (p *program) expect(t *testing.T, pattern string) []string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("the program exited before a line matching %s; stderr:\n%s", pattern, p.stderr.String())
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("the program printed\n%s\nwant a line matching\n%s", line, pattern)
		}
		return m[1:]
	case <-time.After(3 * time.Minute):
		t.Fatalf("no line matching %s within 3 minutes; stderr:\n%s", pattern, p.stderr.String())
		return nil
	}
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
	sent := p.expect(t, `^sent message (\S+) \((\S+) on the platform\)$`)
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
	invoked := p.expect(t, `^run (\S+): completed$`)[0]
	p.expect(t, `^  says "Hi Ada, how can we help\?"$`)
	streamed := p.expect(t, `^stream: run (\S+) started$`)[0]
	p.expect(t, `^stream: node start \(start\)$`)
	p.expect(t, `^stream: node hi \(send_message\)$`)
	p.expect(t, `^stream: says "Hi Ada, how can we help\?"$`)
	p.expect(t, `^stream: node done \(end\)$`)
	p.expect(t, `^stream: completed$`)
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
	p.expect(t, `^listening on `+regexp.QuoteMeta(listen)+`$`)
	postUpdate(t, ingress, ch.Secret, telegramMessage(2, 4242, "Ada", "Thanks!"))
	p.expect(t, `^message\.received in `+conv+`: Ada wrote "Thanks!"$`)
	status, _, out := s.api(t, key, http.MethodPost, "/v1/webhook/test", nil)
	d, _ := out["delivery"].(map[string]any)
	if status != http.StatusOK || d["status"] != "delivered" || d["response_status"] != float64(http.StatusOK) {
		t.Fatalf("POST /v1/webhook/test = %d %v", status, out)
	}
	p.expect(t, `^test `+regexp.QuoteMeta(fmt.Sprint(d["id"]))+`$`)
}
