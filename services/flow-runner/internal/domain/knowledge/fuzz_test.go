package knowledge

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSplit checks that any document is split or refused with a
// *ValidationError, never a panic, and that every passage keeps the
// rules: trimmed, non-empty, valid UTF-8, at most MaxPassageRunes, titled
// with the document's title.
func FuzzSplit(f *testing.F) {
	for _, name := range []string{"testdata/store_policy_en.md", "testdata/store_policy_mn.md"} {
		doc, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add("Store policy", string(doc))
	}
	for _, s := range []string{
		"", "# A\n## B\ntext", "Title\n===\n\n- a\n\n  b\n\n```\n# x\n\n```", "---\nk: v\n---\nbody", "~~~\n```\n~~~~",
		"Steps:\n\n1. a\n2) b", "| a |\n|---|", "> q\n> q", "    code", "* * *", "a.b! c? d… e", strings.Repeat("word ", 400),
		"\uFEFFa\r\nb\rc", "#\n##\n###", "- \n-\n+ x", "1234567890. not a list",
	} {
		f.Add("T", s)
	}
	f.Fuzz(func(t *testing.T, title, doc string) {
		d, err := Split(title, []byte(doc))
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err %v is not a *ValidationError", err)
			}
			return
		}
		if len(d.Passages) == 0 || len(d.Passages) > MaxPassages {
			t.Fatalf("%d passages", len(d.Passages))
		}
		clean, _ := cleanTitle(title)
		if d.Title != clean {
			t.Fatalf("title %q, want %q", d.Title, clean)
		}
		for i, p := range d.Passages {
			switch {
			case p.Text == "" || p.Text != strings.TrimSpace(p.Text):
				t.Fatalf("passage %d text %q is empty or untrimmed", i, p.Text)
			case !utf8.ValidString(p.Text) || !utf8.ValidString(p.Title):
				t.Fatalf("passage %d is not UTF-8", i)
			case utf8.RuneCountInString(p.Text) > MaxPassageRunes:
				t.Fatalf("passage %d has %d runes", i, utf8.RuneCountInString(p.Text))
			case !strings.HasPrefix(p.Title, clean) || (p.Heading != "" && p.Title != clean+TitleSeparator+p.Heading):
				t.Fatalf("passage %d title %q, heading %q, document %q", i, p.Title, p.Heading, clean)
			}
		}
	})
}
