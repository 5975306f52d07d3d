package knowledge

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden passages in testdata")

// render lists passages the way the golden files hold them: each title on
// a line of its own after "=== ", then its text.
func render(ps []Passage) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("=== " + p.Title + "\n" + p.Text + "\n")
	}
	return b.String()
}

// TestGoldenDocuments splits the store policies (English, Mongolian) and
// compares every passage with testdata/*.passages.
func TestGoldenDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct{ file, title string }{
		{"store_policy_en.md", "Store policy"},
		{"store_policy_mn.md", "Дэлгүүрийн журам"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			doc, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			d, err := Split(tt.title, doc)
			if err != nil {
				t.Fatal(err)
			}
			ps := d.Passages
			golden := filepath.Join("testdata", strings.TrimSuffix(tt.file, ".md")+".passages")
			got := render(ps)
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("passages differ from %s (go test -update to rewrite):\n%s", golden, got)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give string
		want string
	}{
		{
			name: "text before the first heading has the document's title",
			give: "Intro.\n\n# A\n\nUnder A.",
			want: "=== Doc\nIntro.\n=== Doc › A\nUnder A.\n",
		},
		{
			name: "heading path, a level closed by a higher one",
			give: "# A\n## B\nb\n### C\nc\n## D\nd",
			want: "=== Doc › A › B\nb\n=== Doc › A › B › C\nc\n=== Doc › A › D\nd\n",
		},
		{
			name: "a skipped level leaves no gap",
			give: "# A\n### C\nc",
			want: "=== Doc › A › C\nc\n",
		},
		{
			name: "a first heading equal to the title is not repeated",
			give: "# doc\n\nx\n\n## Sub\n\ny",
			want: "=== Doc\nx\n=== Doc › Sub\ny\n",
		},
		{
			name: "closing hashes and spaces are decoration",
			give: "##   Spaced   out  ##\ntext\n#hashtag is text",
			want: "=== Doc › Spaced out\ntext #hashtag is text\n",
		},
		{
			name: "setext headings",
			give: "Title one\n=========\n\nfirst\n\nTitle two\n---\nsecond",
			want: "=== Doc › Title one\nfirst\n=== Doc › Title one › Title two\nsecond\n",
		},
		{
			name: "wrapped lines are one paragraph, blank lines part them",
			give: "one\ntwo\n\n\nthree",
			want: "=== Doc\none two\n=== Doc\nthree\n",
		},
		{
			name: "a thematic break parts paragraphs",
			give: "one\n\n* * *\n\ntwo\n***\nthree",
			want: "=== Doc\none\n=== Doc\ntwo\n=== Doc\nthree\n",
		},
		{
			name: "a loose list is one paragraph",
			give: "- a\n\n- b\n\n  more of b\n\n1. c\n\nafter",
			want: "=== Doc\n- a\n\n- b\n\n  more of b\n\n1. c\n=== Doc\nafter\n",
		},
		{
			name: "a list right under a line belongs to it",
			give: "We take:\n- cards\n- cash",
			want: "=== Doc\nWe take:\n- cards\n- cash\n",
		},
		{
			name: "a paragraph ending in a colon takes the list after it",
			give: "Steps:\n\n1. one\n2. two\n\nDone.",
			want: "=== Doc\nSteps:\n\n1. one\n2. two\n=== Doc\nDone.\n",
		},
		{
			name: "any other paragraph leaves the list alone",
			give: "Steps.\n\n1. one",
			want: "=== Doc\nSteps.\n=== Doc\n1. one\n",
		},
		{
			name: "a code fence is whole, blank and # lines included",
			give: "Run:\n\n```sh\n# not a heading\n\nmake run\n```\n\nthen",
			want: "=== Doc\nRun:\n\n```sh\n# not a heading\n\nmake run\n```\n=== Doc\nthen\n",
		},
		{
			name: "a tilde fence closes only on its own kind",
			give: "~~~~\n```\n~~~\n~~~~\nafter",
			want: "=== Doc\n~~~~\n```\n~~~\n~~~~\nafter\n",
		},
		{
			name: "an unclosed fence runs to the end",
			give: "```\ncode\n\n# x",
			want: "=== Doc\n```\ncode\n\n# x\n",
		},
		{
			name: "a fence inside a list item",
			give: "- run\n\n  ```\n  a\n\n  b\n  ```\n- next",
			want: "=== Doc\n- run\n\n  ```\n  a\n\n  b\n  ```\n- next\n",
		},
		{
			name: "tables and quotes keep their lines",
			give: "| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted\n> more",
			want: "=== Doc\n| a | b |\n|---|---|\n| 1 | 2 |\n=== Doc\n> quoted\n> more\n",
		},
		{
			name: "front matter is skipped",
			give: "---\ntitle: x\ntags:\n  - a\n---\nbody",
			want: "=== Doc\nbody\n",
		},
		{
			name: "a leading thematic break is not front matter",
			give: "---\nnot yaml here\n---\nbody",
			want: "=== Doc › not yaml here\nbody\n",
		},
		{
			name: "CRLF, CR and a byte order mark",
			give: "\uFEFF# A\r\none\r\ntwo\rthree",
			want: "=== Doc › A\none two three\n",
		},
		{
			name: "a heading without text keeps the path above it",
			give: "# A\n##\ntext",
			want: "=== Doc › A\ntext\n",
		},
		{
			name: "Cyrillic",
			give: "## Буцаалт\n\nБараагаа 14 хоногийн дотор буцаах боломжтой.",
			want: "=== Doc › Буцаалт\nБараагаа 14 хоногийн дотор буцаах боломжтой.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Split("Doc", []byte(tt.give))
			if err != nil {
				t.Fatal(err)
			}
			if got := render(d.Passages); got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestSplitRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		title, doc string
		wantField  string
		wantReason string
	}{
		{"no title", " \n\t", "text", "title", "is required"},
		{"long title", strings.Repeat("я", MaxTitleRunes+1), "text", "title", "over the limit of 200"},
		{"title not UTF-8", "\xff", "text", "title", "UTF-8"},
		{"empty", "T", "", "markdown", "has no text"},
		{"blank", "T", " \n\n\t\n", "markdown", "has no text"},
		{"headings only", "T", "# A\n## B\n---\n", "markdown", "has no text"},
		{"too large", "T", strings.Repeat("a", MaxDocumentBytes+1), "markdown", "over the limit of 524288"},
		{"not UTF-8", "T", "caf\xe9", "markdown", "not valid UTF-8"},
		{"NUL", "T", "a\x00b", "markdown", "NUL"},
		{"too many passages", "T", strings.Repeat("a\n\n", MaxPassages+1), "markdown", "more than 10000 passages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Split(tt.title, []byte(tt.doc))
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.wantField || !strings.Contains(ve.Reason, tt.wantReason) {
				t.Fatalf("err = %v, want %s: ...%s", err, tt.wantField, tt.wantReason)
			}
		})
	}
}

func TestSplitTitleIsCleaned(t *testing.T) {
	t.Parallel()
	d, err := Split("  Returns\n\tpolicy ", []byte("# Refunds\nx"))
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Passages[0]; d.Title != "Returns policy" || p.Title != "Returns policy › Refunds" || p.Heading != "Refunds" {
		t.Fatalf("%+v", d)
	}
}

// TestLongParagraphsAreCut: a paragraph over MaxPassageRunes is cut at
// sentence ends, a list at line ends, a word at MaxPassageRunes; nothing is
// lost and no piece is too long.
func TestLongParagraphsAreCut(t *testing.T) {
	t.Parallel()
	sentence := "Хүргэлт 1–2 хоногийн дотор хийгдэнэ, and we ship the same day! "
	item := "- " + strings.Repeat("item ", 30) + "\n"
	word := strings.Repeat("ы", MaxPassageRunes*2+5)
	tests := []struct {
		name      string
		give      string
		wantParts int
		// wantEnd is how every part but the last ends.
		wantEnd string
	}{
		{"prose", strings.Repeat(sentence, 60), 4, "day!"},
		{"list", strings.Repeat(item, 40), 6, "item"},
		{"one long word", word, 3, "ы"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Split("Doc", []byte(tt.give))
			if err != nil {
				t.Fatal(err)
			}
			ps := d.Passages
			if len(ps) != tt.wantParts {
				t.Fatalf("%d parts, want %d", len(ps), tt.wantParts)
			}
			var words []string
			for i, p := range ps {
				if n := utf8.RuneCountInString(p.Text); n > MaxPassageRunes {
					t.Errorf("part %d has %d runes", i, n)
				}
				if i < len(ps)-1 && !strings.HasSuffix(p.Text, tt.wantEnd) {
					t.Errorf("part %d ends %q", i, p.Text[max(0, len(p.Text)-20):])
				}
				words = append(words, strings.Fields(p.Text)...)
			}
			want := strings.Fields(tt.give)
			if tt.name == "one long word" {
				words, want = []string{strings.Join(words, "")}, []string{word}
			}
			if !slices.Equal(words, want) {
				t.Errorf("words lost or changed: %d words, want %d", len(words), len(want))
			}
		})
	}
}

func TestTerms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give string
		want []string
	}{
		{"question", "How many days do I have to return an item?", []string{"how", "many", "days", "do", "i", "have", "to", "return", "an", "item"}},
		{"cyrillic, lower-cased, each once", "Бараагаа хэдэн хоногийн дотор БУЦААЖ буцааж болох вэ?", []string{"бараагаа", "хэдэн", "хоногийн", "дотор", "буцааж", "болох", "вэ"}},
		{"punctuation and digits", "item's 14-day (return)!", []string{"item", "s", "14", "day", "return"}},
		{"nothing", " ?! ", nil},
		{"a pasted token is left out", "refund " + strings.Repeat("x", 65), []string{"refund"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Terms(tt.give); !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	var many strings.Builder
	for i := range MaxQueryTerms + 8 {
		fmt.Fprintf(&many, "word%d ", i)
	}
	if n := len(Terms(many.String())); n != MaxQueryTerms {
		t.Fatalf("%d terms, want %d", n, MaxQueryTerms)
	}
}
