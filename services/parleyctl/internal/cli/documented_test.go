package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/testenv/repo"
	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

// TestDocumentedCommandLinesAreAccepted holds parleyctl to its list in
// docs/operations.md "The operator CLI: parleyctl": every command line
// written there, its optional flags given and the first of its
// alternatives taken, is accepted (no usage error) and calls a service;
// and every command of parleyctl help is written there with each of its
// flags, so a flag renamed or dropped on either side fails here.
func TestDocumentedCommandLinesAreAccepted(t *testing.T) {
	documented := documentedCommandLines(t)
	dir := t.TempDir()
	files := map[string]string{"FLOW.json": `{"name": "f"}`, "policy.md": "# Policy\n\nReturns within 30 days.\n"}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, lines := range documented {
		for _, line := range lines {
			args := concreteArgs(line, dir)
			restore := cli.SetOperatorStdin(strings.NewReader("correct horse battery\n"))
			rec := &recorder{}
			err := cli.New(testConfig(), rec, &bytes.Buffer{}).Run(context.Background(), args)
			restore()
			var usage *cli.UsageError
			if errors.As(err, &usage) {
				t.Errorf("%s: documented as %q, run as %q: %v", name, line, args, err)
				continue
			}
			if len(rec.calls) == 0 {
				t.Errorf("%s: run as %q called no service (%v)", name, args, err)
			}
		}
	}
	usage, _ := cli.Help([]string{"help"})
	for _, u := range strings.Split(usage, "\n") {
		u = strings.TrimSpace(u)
		if !strings.HasPrefix(u, "parleyctl ") {
			continue
		}
		name := commandName(strings.Fields(strings.TrimPrefix(u, "parleyctl ")))
		lines := documented[name]
		if len(lines) == 0 {
			t.Errorf("parleyctl %s is not in docs/operations.md", name)
			continue
		}
		for _, flag := range flagsOf(u) {
			if !strings.Contains(strings.Join(lines, " "), flag) {
				t.Errorf("parleyctl %s takes %s, which docs/operations.md does not give it", name, flag)
			}
		}
	}
}

// documentedCommandLines reads the command lines of the guide's parleyctl
// block, by command ("channel set-flow"), each without its comment.
func documentedCommandLines(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo.Root(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	inSection, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = line == "## The operator CLI: `parleyctl`"
		case inSection && strings.HasPrefix(line, "```"):
			inBlock = !inBlock
		case inBlock:
			_, cmd, ok := strings.Cut(line, "bin/parleyctl ")
			if !ok {
				continue
			}
			cmd, _, _ = strings.Cut(cmd, "#")
			cmd = strings.TrimSpace(cmd)
			name := commandName(strings.Fields(cmd))
			out[name] = append(out[name], cmd)
		}
	}
	if len(out) == 0 {
		t.Fatal("no parleyctl command lines found in docs/operations.md")
	}
	return out
}

// commandName is "group verb" of the words of a command line, or the
// lone verb (demo).
func commandName(words []string) string {
	if len(words) > 1 && !strings.HasPrefix(words[1], "-") {
		return words[0] + " " + words[1]
	}
	return words[0]
}

// flagsOf lists the flags a usage line names.
func flagsOf(usage string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(usage, func(r rune) bool { return strings.ContainsRune(" []()|", r) }) {
		if strings.HasPrefix(w, "--") {
			out = append(out, w)
		}
	}
	return out
}

// concreteArgs turns a documented line into arguments: brackets opened
// (optional flags given), the first of each set of alternatives taken,
// quotes removed, and the placeholders of files, times and lists filled.
func concreteArgs(line, dir string) []string {
	values := map[string]string{
		"FLOW.json": filepath.Join(dir, "FLOW.json"), "policy.md": filepath.Join(dir, "policy.md"),
		"...": "developer_api", "N": "5", "KIND": "message.received",
	}
	// --since, then --until an hour later.
	times := []string{"2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z"}
	var out []string
	skipping := false
	for _, w := range splitQuoted(line) {
		if skipping {
			skipping = !strings.HasSuffix(w, ")")
			continue
		}
		if w == "|" {
			skipping = true
			continue
		}
		w = strings.Trim(w, "[]()")
		w, _, _ = strings.Cut(w, "|")
		if v, ok := values[w]; ok {
			w = v
		} else if w == "RFC3339" {
			w, times = times[0], times[1:]
		}
		out = append(out, w)
	}
	return out
}

// splitQuoted splits a shell line on spaces, keeping "quoted words" whole
// and without their quotes.
func splitQuoted(line string) []string {
	var out []string
	var word strings.Builder
	quoted, started := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, started = !quoted, true
		case r == ' ' && !quoted:
			if started {
				out = append(out, word.String())
				word.Reset()
				started = false
			}
		default:
			word.WriteRune(r)
			started = true
		}
	}
	if started {
		out = append(out, word.String())
	}
	return out
}
