// Package opsdoc reads the tables of docs/operations.md, the one home of
// each service's settings ("Configuration") and metrics ("Metrics"), for
// the tests that hold the code to them (configdoc, metricsdoc).
package opsdoc

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/testenv/repo"
)

// Guide is the operators' guide, from the repository's root.
const Guide = "docs/operations.md"

// Rows reads the table rows whose first cell starts with a backquote
// ("| `NAME` ...") under the given "### " sections of the "## " chapter,
// by section, each row as its cells, trimmed. A section the chapter does
// not have fails the test.
func Rows(t testing.TB, chapter string, sections ...string) map[string][][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo.Root(t), Guide))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]bool{}
	for _, s := range sections {
		want[s] = true
	}
	out := map[string][][]string{}
	found := map[string]bool{}
	inChapter, section := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inChapter, section = line == "## "+chapter, ""
			continue
		case strings.HasPrefix(line, "### "):
			section = ""
			if name := strings.TrimPrefix(line, "### "); inChapter && want[name] {
				section, found[name] = name, true
			}
			continue
		}
		if section == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		out[section] = append(out[section], cells)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range sections {
		if !found[s] {
			t.Fatalf("%s has no section %q under %q", Guide, s, chapter)
		}
	}
	return out
}
