package logging

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
)

// captureStderr runs fn with os.Stderr, where New's logger writes, going
// to a pipe, and returns the lines written.
func captureStderr(t *testing.T, fn func()) []string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	t.Cleanup(func() { os.Stderr = saved })
	lines := make(chan []string)
	go func() {
		var out []string
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		_, _ = io.Copy(io.Discard, r)
		lines <- out
	}()
	fn()
	os.Stderr = saved
	_ = w.Close()
	return <-lines
}

// TestEntriesAreJSONWithTheService: docs/operations.md "Logs".
func TestEntriesAreJSONWithTheService(t *testing.T) {
	t.Setenv("LOG_LEVEL", "")
	t.Setenv("LOG_FORMAT", "")
	lines := captureStderr(t, func() {
		log, err := New("webhook-dispatcher")
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("not at info")
		log.Info("hello")
		_ = log.Sync()
	})
	if len(lines) != 1 {
		t.Fatalf("lines = %q, want the info line only", lines)
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
		t.Fatalf("%q is not JSON: %v", lines[0], err)
	}
	if entry["service"] != "webhook-dispatcher" || entry["msg"] != "hello" || entry["level"] != "info" || entry["ts"] == nil {
		t.Fatalf("entry = %v", entry)
	}
}

// TestBadLevelIsRefused names the variable.
func TestBadLevelIsRefused(t *testing.T) {
	t.Setenv("LOG_LEVEL", "loud")
	if _, err := New("gateway"); err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") {
		t.Fatalf("err = %v, want one naming LOG_LEVEL", err)
	}
}

// TestBadFormatIsRefused names the variable, as any bad setting stops
// the service at start (docs/operations.md "Configuration").
func TestBadFormatIsRefused(t *testing.T) {
	t.Setenv("LOG_LEVEL", "")
	for _, format := range []string{"text", "Console", "jsn"} {
		t.Setenv("LOG_FORMAT", format)
		if _, err := New("gateway"); err == nil || !strings.Contains(err.Error(), "LOG_FORMAT") {
			t.Fatalf("LOG_FORMAT=%s: err = %v, want one naming LOG_FORMAT", format, err)
		}
	}
	for _, format := range []string{"", "json", "console"} {
		t.Setenv("LOG_FORMAT", format)
		if _, err := New("gateway"); err != nil {
			t.Fatalf("LOG_FORMAT=%q: %v", format, err)
		}
	}
}

// TestRepeatedLinesAreSampled: of the lines with the same message and
// level, a service writes the first 100 of each second and then every
// 100th (docs/operations.md "Logs"); other messages are counted apart.
func TestRepeatedLinesAreSampled(t *testing.T) {
	for _, format := range []string{"", "console"} {
		t.Run("LOG_FORMAT="+format, func(t *testing.T) { testSampling(t, format) })
	}
}

func testSampling(t *testing.T, format string) {
	t.Setenv("LOG_LEVEL", "")
	t.Setenv("LOG_FORMAT", format)
	lines := captureStderr(t, func() {
		log, err := New("webhook-dispatcher")
		if err != nil {
			t.Fatal(err)
		}
		// Well within one second: the sampler's second starts at the
		// first line.
		for range 250 {
			log.Info("webhook attempt delivered")
		}
		for range 3 {
			log.Info("webhook circuit opened")
		}
		// Errors too (docs/operations.md "Logs": a 500's line may be left
		// out in an outage).
		for range 250 {
			log.Error("request failed")
		}
		_ = log.Sync()
	})
	count := map[string]int{}
	for _, l := range lines {
		for _, msg := range []string{"webhook attempt delivered", "webhook circuit opened", "request failed"} {
			if strings.Contains(l, msg) {
				count[msg]++
			}
		}
	}
	if count["webhook attempt delivered"] != 101 || count["webhook circuit opened"] != 3 || count["request failed"] != 101 {
		t.Fatalf("lines by message = %v, want 101 of each 250 repeated (the first 100, then the 200th), errors too, and all 3 others", count)
	}
}
