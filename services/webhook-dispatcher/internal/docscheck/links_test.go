package docscheck

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// allowedOutside are the only addresses outside the repository a guide may
// link to: the platforms' own public APIs, where a reader has nowhere else
// to look. Everything else a guide needs is written in the repository.
var allowedOutside = []string{
	"https://api.telegram.org/",
	"https://core.telegram.org/bots/api",
	"https://graph.facebook.com/",
	"https://developers.facebook.com/docs/messenger-platform",
	"https://developers.facebook.com/docs/instagram-platform",
}

// TestDocsLinksStayInsideTheRepository reads README.md and every docs/*.md:
// each relative link must name a file or directory of the repository, and
// its #anchor, when it has one, a heading (or an <a id>) of that Markdown
// file; a link outside the repository must be on allowedOutside; and no
// guide may point at design documents a clone does not have.
func TestDocsLinksStayInsideTheRepository(t *testing.T) {
	root := repoRoot(t)
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // Markdown file -> its anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		a := headingAnchors(string(src))
		anchors[path] = a
		return a
	}

	checked := 0
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"../shared", "/work/", "shared/spec", "shared/design"} {
			if strings.Contains(string(src), banned) {
				t.Errorf("%s mentions %q: a clone has only the repository", rel, banned)
			}
		}
		for _, l := range links(string(src)) {
			checked++
			where := fmt.Sprintf("%s:%d: %s", rel, l.line, l.target)
			u, err := url.Parse(l.target)
			if err != nil {
				t.Errorf("%s: not a URL: %v", where, err)
				continue
			}
			if u.Scheme != "" || strings.HasPrefix(l.target, "//") {
				if !hasPrefix(l.target, allowedOutside) {
					t.Errorf("%s: links outside the repository", where)
				}
				continue
			}
			target := file
			if u.Path != "" {
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(u.Path))
				if r, err := filepath.Rel(root, target); err != nil || strings.HasPrefix(r, "..") {
					t.Errorf("%s: leaves the repository", where)
					continue
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: no such file or directory in the repository", where)
					continue
				}
			}
			if u.Fragment != "" {
				if !strings.HasSuffix(target, ".md") {
					continue // a line anchor of a source file (#L10) is GitHub's, not the file's
				}
				if !anchorsOf(target)[u.Fragment] {
					t.Errorf("%s: no heading with anchor #%s in %s", where, u.Fragment, filepath.Base(target))
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links found: the parser is broken")
	}
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

type link struct {
	line   int
	target string
}

var (
	inlineLink    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	referenceDef  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	htmlAttribute = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*"([^"]*)"`)
	autolink      = regexp.MustCompile(`<((?:https?|ftp|mailto):[^>\s]+)>`)
	bareURL       = regexp.MustCompile(`(?i)\b(?:https?://|www\.)[^\s<>()]+`)
)

// links returns the link targets of a Markdown document outside code:
// inline links and images, reference definitions, HTML href/src,
// autolinks and the bare URLs GitHub would turn into links.
func links(src string) []link {
	var out []link
	for _, para := range paragraphs(src) {
		// Code spans may run over a line break inside a paragraph.
		text := withoutCodeSpans(para.text)
		for n, line := range strings.Split(text, "\n") {
			add := func(target string) { out = append(out, link{line: para.index + n + 1, target: target}) }
			for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
				add(m[1])
			}
			line = inlineLink.ReplaceAllString(line, "")
			if m := referenceDef.FindStringSubmatch(line); m != nil {
				add(m[1])
				continue
			}
			for _, m := range htmlAttribute.FindAllStringSubmatch(line, -1) {
				add(m[1])
			}
			line = htmlAttribute.ReplaceAllString(line, "")
			for _, m := range autolink.FindAllStringSubmatch(line, -1) {
				add(m[1])
			}
			line = autolink.ReplaceAllString(line, "")
			for _, m := range bareURL.FindAllString(line, -1) {
				if strings.HasPrefix(strings.ToLower(m), "www.") {
					m = "http://" + m
				}
				add(strings.TrimRight(m, ".,;:!?'\"*_"))
			}
		}
	}
	return out
}

// paragraphs joins the prose lines of a document into runs of consecutive
// lines, broken at blank lines and fences; index is the first line's.
func paragraphs(src string) []proseLine {
	var out []proseLine
	prev := -2
	for _, pl := range proseLines(src) {
		switch {
		case strings.TrimSpace(pl.text) == "":
			prev = -2
			continue
		case pl.index == prev+1 && len(out) > 0:
			out[len(out)-1].text += "\n" + pl.text
		default:
			out = append(out, pl)
		}
		prev = pl.index
	}
	return out
}

// withoutCodeSpans drops the code spans of a text: a run of n backticks up
// to the next run of exactly n (an unclosed run is text), keeping the line
// breaks inside them so that line numbers stay true.
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(line) && line[j+m] == '`' {
				m++
			}
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			b.WriteString(line[i : i+n])
			i += n
			continue
		}
		b.WriteString(strings.Repeat("\n", strings.Count(line[i:end], "\n")))
		i = end
	}
	return b.String()
}

type proseLine struct {
	index int // from 0
	text  string
}

// proseLines returns the lines of a Markdown document that are not in a
// fenced code block (``` or ~~~), nor its fences.
func proseLines(src string) []proseLine {
	var out []proseLine
	inFence := ""
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence := fenceOf(trimmed); fence != "" {
			switch {
			case inFence == "":
				inFence = fence
			case strings.HasPrefix(trimmed, inFence) && strings.TrimLeft(trimmed, inFence[:1]) == "":
				inFence = ""
			}
			continue
		}
		if inFence == "" {
			out = append(out, proseLine{index: i, text: line})
		}
	}
	return out
}

// fenceOf returns the fence a line opens or closes (``` or ~~~, three or
// more), or "".
func fenceOf(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(trimmed, c+c+c) {
			n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
			return strings.Repeat(c, n)
		}
	}
	return ""
}

var (
	atxHeading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	explicitID = regexp.MustCompile(`(?i)<a\s+(?:id|name)\s*=\s*"([^"]+)"`)
	markdownIn = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives a document's headings
// (lower case, punctuation dropped, spaces to hyphens, "-1", "-2" for
// repeats) and its explicit <a id>/<a name> anchors.
func headingAnchors(src string) map[string]bool {
	anchors := map[string]bool{}
	count := map[string]int{}
	for _, pl := range proseLines(src) {
		line := pl.text
		for _, m := range explicitID.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(markdownIn.ReplaceAllString(m[1], "$1"))
		if n := count[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		count[slug]++
	}
	return anchors
}

func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestHeadingAnchorsAreGitHubs(t *testing.T) {
	got := headingAnchors("# Parley\n## Running locally: `make run`, and stopping\n" +
		"### The invoke contract: idempotency, limits, streaming\n## Webhooks\n## Webhooks\n" +
		"```\n# not a heading\n```\n## [Linked](x.md) *heading* — dash\n<a id=\"custom\"></a>\n")
	for _, want := range []string{"parley", "running-locally-make-run-and-stopping",
		"the-invoke-contract-idempotency-limits-streaming", "webhooks", "webhooks-1",
		"linked-heading--dash", "custom"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code fence was taken as a heading")
	}
}

func TestLinksSkipCodeAndFindEveryKind(t *testing.T) {
	src := "See [a](a.md#x) and ![i](img/p.png \"t\") and `[no](code.md)` and https://example.com/x.\n" +
		"a span `over\nhttps://two.example/lines` ends\n\n" +
		"```sh\ncurl https://api.example.com [no](fenced.md)\n```\n" +
		"[ref]: ../deploy/k8s/\n<a href=\"b.md\">b</a> <https://c.example>\n"
	var got []string
	for _, l := range links(src) {
		got = append(got, l.target)
	}
	want := []string{"a.md#x", "img/p.png", "https://example.com/x", "../deploy/k8s/", "b.md", "https://c.example"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links = %q, want %q", got, want)
	}
}
