package docscheck

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/lines"
	"github.com/parleyhq/parley/pkg/testenv/repo"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/webhookhttp"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/envelope"
)

// exampleSecret is what the examples are started with; a real one comes
// from PUT /v1/webhook.
const exampleSecret = "whsec_docs_example_0123456789abcdefghijklmnopqrstuv"

// startTimeout covers `go run` compiling the Go example on a loaded machine.
const startTimeout = 3 * time.Minute

// TestDocsExamplesVerifyWhatTheDispatcherSends starts each receiver of
// docs/examples and has the dispatcher's own sender (webhookhttp, the
// signer and headers of every real attempt) post envelopes rendered by the
// dispatcher's own envelope package to it: a genuine delivery is accepted
// with its raw body intact (the standard-library examples print it; the
// Go one, built on the client's webhook package, prints what it decoded),
// a wrong secret and a timestamp outside the 300-second window either way
// are refused, one just inside is accepted, and a repeated delivery id is
// acknowledged without being handled again.
func TestDocsExamplesVerifyWhatTheDispatcherSends(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "docs", "examples")
	// The reasons each gives in its 401: the standard-library receivers
	// say their own words, sdk/go/webhook its errors'.
	stdlib := example{badSignature: "bad signature", staleTimestamp: "stale timestamp", accepted: rawLine}
	examples := []example{
		{file: "verify.go", argv: []string{"go", "run", "verify.go"}, badSignature: "signature does not match", staleTimestamp: "timestamp refused", accepted: decodedLine},
		stdlib.as("verify.py", "python3", "verify.py"),
		stdlib.as("verify.js", "node", "verify.js"),
	}
	for _, ex := range examples {
		t.Run(ex.file, func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(ex.argv[0]); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s is missing: the %s example cannot be checked", ex.argv[0], ex.file)
				}
				t.Skipf("%s is missing; skipping the %s example", ex.argv[0], ex.file)
			}
			rx := startExample(t, dir, ex.argv)
			checkExample(t, ex, rx)
		})
	}
}

// example is one receiver of docs/examples and what it says.
type example struct {
	file string
	argv []string
	// badSignature and staleTimestamp are in its 401 bodies.
	badSignature, staleTimestamp string
	// accepted is the line it prints for a delivery it handles.
	accepted func(sample) string
}

func (ex example) as(file string, argv ...string) example {
	ex.file, ex.argv = file, argv
	return ex
}

// rawLine is "accepted <event> <delivery id> <raw body>".
func rawLine(d sample) string { return "accepted " + d.event + " " + d.id + " " + string(d.body) }

// decodedLine is what verify.go prints: the event and its id, and for a
// message who wrote what, decoded from the verified body.
func decodedLine(d sample) string {
	line := "accepted " + d.event + " " + d.id
	if d.event == delivery.EventMessageReceived {
		line += fmt.Sprintf(": %s wrote %q", d.name, d.text)
	}
	return line
}

// TestWebhooksGuideShowsEachExampleVerbatim keeps docs/webhooks.md and the
// tested files one text: each example appears whole in a code block of
// its language.
func TestWebhooksGuideShowsEachExampleVerbatim(t *testing.T) {
	root := repoRoot(t)
	guide, err := os.ReadFile(filepath.Join(root, "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for file, fence := range map[string]string{"verify.go": "go", "verify.py": "python", "verify.js": "js"} {
		src, err := os.ReadFile(filepath.Join(root, "docs", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		block := "```" + fence + "\n" + strings.TrimRight(string(src), "\n") + "\n```\n"
		if !strings.Contains(string(guide), block) {
			t.Errorf("docs/webhooks.md does not show docs/examples/%s verbatim in a ```%s block", file, fence)
		}
	}
}

func checkExample(t *testing.T, ex example, rx *runningExample) {
	now := time.Now()
	message := messageEnvelope(t, now)
	test := testEnvelope(t, now)

	send := func(clock func() time.Time, secret string, d sample) delivery.Result {
		t.Helper()
		sender := webhookhttp.New(webhookhttp.Options{
			AllowPrivateTargets: true,
			UserAgent:           "Parley-Webhooks/docs-test",
			Clock:               clock,
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return sender.Send(ctx, delivery.Request{
			URL: rx.url, Secret: secret, Event: d.event, DeliveryID: d.id, Body: d.body,
		})
	}
	shifted := func(by time.Duration) func() time.Time {
		return func() time.Time { return time.Now().Add(by) }
	}

	// A genuine delivery: accepted, and the example saw the very bytes sent.
	if res := send(time.Now, exampleSecret, message); res.Status/100 != 2 {
		t.Fatalf("genuine delivery: got %d %q, want 2xx", res.Status, res.Error)
	}
	rx.expectAccepted(t, ex.accepted(message))

	refusals := []struct {
		name   string
		clock  func() time.Time
		secret string
		reason string
	}{
		{"signed with another secret", time.Now, exceptLast(exampleSecret) + "x", ex.badSignature},
		// Timestamps are whole seconds, cut down: 301 s back is always past
		// the window, while ahead needs a few seconds' margin.
		{"timestamp 301 s old", shifted(-301 * time.Second), exampleSecret, ex.staleTimestamp},
		{"timestamp 10 min old", shifted(-10 * time.Minute), exampleSecret, ex.staleTimestamp},
		{"timestamp 305 s ahead", shifted(305 * time.Second), exampleSecret, ex.staleTimestamp},
	}
	for _, r := range refusals {
		res := send(r.clock, r.secret, test)
		if res.Status != 401 || !strings.Contains(res.Error, r.reason) {
			t.Errorf("%s: got %d %q, want 401 %q", r.name, res.Status, res.Error, r.reason)
		}
	}

	// Inside the window (with room for the seconds this takes): accepted.
	if res := send(shifted(-280*time.Second), exampleSecret, test); res.Status/100 != 2 {
		t.Fatalf("timestamp 280 s old: got %d %q, want 2xx", res.Status, res.Error)
	}
	rx.expectAccepted(t, ex.accepted(test))

	// A retry of a delivery already handled: 2xx again, handled once. The
	// next line the example prints must be the following new delivery's.
	if res := send(time.Now, exampleSecret, test); res.Status/100 != 2 {
		t.Fatalf("repeated delivery: got %d %q, want 2xx", res.Status, res.Error)
	}
	next := testEnvelope(t, time.Now())
	if res := send(time.Now, exampleSecret, next); res.Status/100 != 2 {
		t.Fatalf("second test event: got %d %q, want 2xx", res.Status, res.Error)
	}
	rx.expectAccepted(t, ex.accepted(next))
}

func exceptLast(s string) string { return s[:len(s)-1] }

// sample is one delivery: what webhookhttp posts, and for a message its
// contact's name and text.
type sample struct {
	event, id  string
	body       []byte
	name, text string
}

// messageEnvelope renders a message.received whose text and name hold what
// JSON re-encoding would change (non-ASCII, <, &, an emoji), so an example
// that verified parsed-and-re-encoded JSON instead of the raw body fails.
func messageEnvelope(t *testing.T, now time.Time) sample {
	t.Helper()
	id := uuid.NewString()
	ws := uuid.NewString()
	const name, text = "Ада <3 & co", "Захиалга хаана байна? <b>now</b> 📦  \"quoted\""
	body, err := envelope.Render(&eventsv1.Event{
		Id: id, Type: delivery.EventMessageReceived, WorkspaceId: ws, CreatedAt: timestamppb.New(now),
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId:    ws,
			ConversationId: uuid.NewString(),
			Platform:       "telegram",
			Channel:        &eventsv1.Channel{Kind: "telegram", ExternalId: "parley_demo_bot"},
			Contact:        &eventsv1.Contact{Id: uuid.NewString(), SenderId: "4242", Name: name},
			Message: &eventsv1.Message{
				Id: uuid.NewString(), Text: text,
				Type: "text", ExternalId: "1", CreatedAt: timestamppb.New(now),
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sample{event: delivery.EventMessageReceived, id: id, body: body, name: name, text: text}
}

func testEnvelope(t *testing.T, now time.Time) sample {
	t.Helper()
	id := uuid.NewString()
	body, err := envelope.RenderTest(id, uuid.NewString(), now)
	if err != nil {
		t.Fatal(err)
	}
	return sample{event: delivery.EventTest, id: id, body: body}
}

// runningExample is an example receiver started by the test.
type runningExample struct {
	*lines.Program
	url string
}

// startExample runs argv in dir with PORT=0 and reads the address it
// prints.
func startExample(t *testing.T, dir string, argv []string) *runningExample {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PARLEY_WEBHOOK_SECRET="+exampleSecret, "PORT=0")
	rx := &runningExample{Program: lines.Start(t, cmd)}
	line := rx.Next(t, startTimeout)
	addr, found := strings.CutPrefix(line, "listening on ")
	if !found {
		t.Fatalf("%v did not say where it listens: %q; stderr: %s", argv, line, rx.Stderr())
	}
	rx.url = "http://" + addr + "/parley"
	return rx
}

// expectAccepted wants the example's next line to be want.
func (rx *runningExample) expectAccepted(t *testing.T, want string) {
	t.Helper()
	if line := rx.Next(t, 30*time.Second); line != want {
		t.Fatalf("the example printed\n%s\nwant\n%s", line, want)
	}
}

// repoRoot is the repository's root.
func repoRoot(t *testing.T) string { return repo.Root(t) }
