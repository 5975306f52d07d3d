package run

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

// FuzzRun runs whatever Parse accepts, with ports that always answer, and
// checks that a run ends in one of its states (never a panic) and that a
// waiting run can be continued.
func FuzzRun(f *testing.F) {
	files, _ := filepath.Glob("../flow/testdata/valid/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b, "answer")
	}
	f.Add([]byte(orderStatus), "42")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		def, err := flow.Parse(data, flow.ParseOptions{})
		if err != nil {
			return
		}
		e := &Engine{
			Budget: Budget{Time: time.Second, Nodes: 50},
			HTTP:   shop(200, `{"status":"ok","items":[1,2]}`, nil),
			Flows:  flowMap{"flow_123": def},
			Scripts: scriptFunc(func(context.Context, string, map[string]any, time.Duration) (any, error) {
				return map[string]any{"ok": true}, nil
			}),
		}
		res := e.Invoke(context.Background(), def, Invocation{WorkspaceID: "ws1", SessionID: "s", Input: map[string]any{"name": "Ann"},
			Modules: Modules{FlowScript: true}})
		check := func(r *Run) {
			switch r.Status {
			case StatusCompleted, StatusWaiting:
			case StatusFailed:
				if r.Error == nil || r.Error.Code == "" {
					t.Fatal("failed without an error")
				}
			default:
				t.Fatalf("status %q", r.Status)
			}
		}
		check(res.Run)
		if res.Run.Status == StatusWaiting {
			if _, err := e.Continue(context.Background(), def, res.Run, Continuation{Text: text, Modules: Modules{FlowScript: true}}); err != nil {
				t.Fatal(err)
			}
			check(res.Run)
		}
	})
}
