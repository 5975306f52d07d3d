package docscheck

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestCodeCommentsCiteDocumentsThatExist reads the comments of the code
// (Go, shell, Makefile, YAML, proto, SQL, Dockerfiles, env and conf files,
// Python, HTML templates): every Markdown file a comment names must be in
// the repository, and a heading it cites after the file's name (a quoted
// title, or a #anchor) must be a heading of that file. A comment may not
// cite the product's specification either (productSpec): a clone does not
// have it. A section number
// after a guide's name is refused: the guides are cited by heading, which
// is what a reader finds. A comment that cites the README by name and
// heading without the extension is held to the same rule.
func TestCodeCommentsCiteDocumentsThatExist(t *testing.T) {
	root := repoRoot(t)
	var problems []string
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skippedDirs[filepath.ToSlash(rel)] || (rel != "." && strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci") {
				return filepath.SkipDir
			}
			return nil
		}
		lang := languageOf(rel)
		if lang == nil {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, c := range lang(string(src)) {
			if m := productSpec.FindString(c.text); m != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: cites %q, a document the repository does not have: cite the guide that states the rule", filepath.ToSlash(rel), c.line, m))
			}
			for _, cite := range citations(c.text) {
				checked++
				if msg := checkCitation(root, filepath.Dir(path), cite); msg != "" {
					problems = append(problems, fmt.Sprintf("%s:%d: %s", filepath.ToSlash(rel), c.line, msg))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	if checked == 0 {
		t.Fatal("no citation found in the code's comments: the scanner is broken")
	}
}

// productSpec is a comment's reference to the product's specification,
// which a clone does not have: the rules it states are in the guides,
// which a comment cites instead. "The OpenAPI specification" and an RFC's
// sections are other documents.
var productSpec = regexp.MustCompile(`(?i)\bthe specification\b|\bspecification(?:'s|\s*§)|\bspec(?:'s|\s*§|\s*\(§)`)

// skippedDirs hold no code of ours: build output, and bundles vendored
// byte for byte (their comments are their authors').
var skippedDirs = map[string]bool{
	"bin":              true,
	"bench":            true,
	"e2e/testdata/axe": true,
	"services/gateway/internal/ports/http/docs/assets": true,
}

// comment is the text of a comment block (consecutive comment lines joined
// with spaces, markers taken out) and the line it starts on, from 1.
type comment struct {
	line int
	text string
}

// languageOf returns the comment reader of a file by its name, nil for a
// file the check does not read.
func languageOf(rel string) func(string) []comment {
	base := filepath.Base(rel)
	switch {
	case strings.HasSuffix(base, ".go"):
		return goComments
	case base == "Makefile", strings.HasSuffix(base, ".mk"), base == "Dockerfile", strings.HasSuffix(base, ".Dockerfile"),
		strings.HasSuffix(base, ".sh"), strings.HasSuffix(base, ".yaml"), strings.HasSuffix(base, ".yml"),
		strings.HasSuffix(base, ".env"), strings.HasSuffix(base, ".conf"), strings.HasSuffix(base, ".py"),
		strings.HasPrefix(filepath.ToSlash(rel), ".ci/"):
		return lineComments(hashComment)
	case strings.HasSuffix(base, ".proto"):
		return lineComments(slashComment)
	case strings.HasSuffix(base, ".sql"):
		return lineComments(dashComment)
	case strings.HasSuffix(base, ".html"), strings.HasSuffix(base, ".tmpl"):
		return templateComments
	}
	return nil
}

// goComments reads a Go file's comments with the Go scanner, so a string
// that looks like a comment is not one.
func goComments(src string) []comment {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, []byte(src), nil, scanner.ScanComments)
	var out []comment
	lastLine := -2
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			continue
		}
		line := fset.Position(pos).Line
		text := strings.TrimPrefix(lit, "//")
		if strings.HasPrefix(lit, "/*") {
			text = strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/")
		}
		text = strings.TrimSpace(text)
		if strings.HasPrefix(lit, "//") && line == lastLine+1 && len(out) > 0 {
			out[len(out)-1].text += " " + text
		} else {
			out = append(out, comment{line: line, text: text})
		}
		lastLine = line + strings.Count(lit, "\n")
	}
	return out
}

var (
	hashComment  = regexp.MustCompile(`(?:^|[\s@])#+(.*)$`)
	slashComment = regexp.MustCompile(`(?:^|\s)//+(.*)$`)
	dashComment  = regexp.MustCompile(`(?:^|\s)--+(.*)$`)
)

// lineComments reads comments that run from a marker to the end of the
// line, joining those on consecutive lines into one block.
func lineComments(marker *regexp.Regexp) func(string) []comment {
	return func(src string) []comment {
		var out []comment
		last := -2
		for i, line := range strings.Split(src, "\n") {
			m := marker.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			text := strings.TrimSpace(m[1])
			if i == last+1 && len(out) > 0 {
				out[len(out)-1].text += " " + text
			} else {
				out = append(out, comment{line: i + 1, text: text})
			}
			last = i
		}
		return out
	}
}

var templateComment = regexp.MustCompile(`(?s)<!--(.*?)-->|\{\{-?\s*/\*(.*?)\*/\s*-?\}\}`)

// templateComments reads an HTML template's comments: HTML's and the
// template language's.
func templateComments(src string) []comment {
	var out []comment
	for _, m := range templateComment.FindAllStringSubmatchIndex(src, -1) {
		text := ""
		for g := 2; g < len(m); g += 2 {
			if m[g] >= 0 {
				text = src[m[g]:m[g+1]]
			}
		}
		out = append(out, comment{line: strings.Count(src[:m[0]], "\n") + 1, text: strings.Join(strings.Fields(text), " ")})
	}
	return out
}

// citation is one document a comment names: its path as written, and the
// heading, anchor or section number written after it, if any.
type citation struct {
	path    string
	heading string // a quoted title
	anchor  string // a #fragment
	section string // a § number
}

var (
	// A Markdown file's name, with the directories before it, and what
	// may follow: a #anchor, a quoted heading (after a comma or space),
	// or a section number.
	markdownName = regexp.MustCompile(`([A-Za-z0-9_][A-Za-z0-9_.\-/]*\.md)\b(?:#([A-Za-z0-9_\-]+))?(?:,?\s*"([^"]+)"|\s*(§\s*[0-9A-Za-z.]+))?`)
	// The README cited by name and heading, without its extension.
	readmeHeading = regexp.MustCompile(`\bREADME(?:'s)?,?\s+"([^"]+)"`)
)

// citations returns the documents a comment's text cites. A name inside a
// URL (https://…/README.md) is another site's and is left alone.
func citations(text string) []citation {
	var out []citation
	for _, m := range markdownName.FindAllStringSubmatchIndex(text, -1) {
		start := strings.LastIndexAny(text[:m[0]], " \t(<'`") + 1
		if strings.Contains(text[start:m[0]], "://") {
			continue
		}
		c := citation{path: text[m[2]:m[3]]}
		if m[4] >= 0 {
			c.anchor = text[m[4]:m[5]]
		}
		if m[6] >= 0 {
			c.heading = text[m[6]:m[7]]
		}
		if m[8] >= 0 {
			c.section = text[m[8]:m[9]]
		}
		out = append(out, c)
	}
	for _, m := range readmeHeading.FindAllStringSubmatch(text, -1) {
		out = append(out, citation{path: "README.md", heading: m[1]})
	}
	return out
}

// checkCitation returns what is wrong with c, cited from a file in dir, or
// "". A name with directories is looked up from the repository's root or
// from dir; a bare name in dir, at the root, or in docs/.
func checkCitation(root, dir string, c citation) string {
	var candidates []string
	if strings.Contains(c.path, "/") {
		candidates = []string{filepath.Join(root, c.path), filepath.Join(dir, c.path)}
	} else {
		candidates = []string{filepath.Join(dir, c.path), filepath.Join(root, c.path), filepath.Join(root, "docs", c.path)}
	}
	found := ""
	for _, p := range candidates {
		if r, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(r, "..") {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			found = p
			break
		}
	}
	if found == "" {
		return fmt.Sprintf("cites %s, which the repository does not have (cite docs/<guide>.md and a heading)", c.path)
	}
	if c.section != "" {
		return fmt.Sprintf("cites %s %s: cite a heading of it, in quotes, not a section number", c.path, c.section)
	}
	if c.heading == "" && c.anchor == "" {
		return ""
	}
	src, err := os.ReadFile(found)
	if err != nil {
		return err.Error()
	}
	anchors := headingAnchors(string(src))
	if c.anchor != "" && !anchors[c.anchor] {
		return fmt.Sprintf("cites %s#%s, which has no heading with that anchor", c.path, c.anchor)
	}
	if c.heading != "" && !anchors[slugify(c.heading)] {
		return fmt.Sprintf("cites %s %q, which has no such heading", c.path, c.heading)
	}
	return ""
}

func TestCitationsAreFoundInEveryKindOfComment(t *testing.T) {
	goSrc := "package x\n\n// Package x (DESIGN.md §6) does it.\n// See docs/architecture.md \"Delivery\n// semantics\" and the README, \"Quick start\".\nvar s = \"STRING.md is no comment\" /* docs/flows.md#the-run-budget */\n"
	var got []string
	for _, c := range goComments(goSrc) {
		for _, cite := range citations(c.text) {
			got = append(got, fmt.Sprintf("%d %s|%s|%s|%s", c.line, cite.path, cite.heading, cite.anchor, cite.section))
		}
	}
	want := []string{
		"3 DESIGN.md|||§6",
		"3 docs/architecture.md|Delivery semantics||",
		"3 README.md|Quick start||",
		"6 docs/flows.md||the-run-budget|",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Go citations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	shSrc := "x=${y#*/}  # see NOTES.md\n\t@# and HOUSE.md \"Errors\"\necho \"not.md\"\n"
	got = nil
	for _, c := range lineComments(hashComment)(shSrc) {
		for _, cite := range citations(c.text) {
			got = append(got, fmt.Sprintf("%d %s|%s", c.line, cite.path, cite.heading))
		}
	}
	if strings.Join(got, ",") != "1 NOTES.md|,1 HOUSE.md|Errors" {
		t.Errorf("shell citations: %q", got)
	}

	html := "<p>x</p>\n<!-- GONE.md -->\n{{/* docs/console.md \"The pages\" */}}\n"
	got = nil
	for _, c := range templateComments(html) {
		for _, cite := range citations(c.text) {
			got = append(got, fmt.Sprintf("%d %s|%s", c.line, cite.path, cite.heading))
		}
	}
	if strings.Join(got, ",") != "2 GONE.md|,3 docs/console.md|The pages" {
		t.Errorf("template citations: %q", got)
	}

	if cs := citations("https://github.com/x/y/blob/main/README.md is theirs"); len(cs) != 0 {
		t.Errorf("a URL was taken for a citation: %+v", cs)
	}
}

func TestCitationsAreChecked(t *testing.T) {
	root := repoRoot(t)
	tests := []struct {
		give citation
		ok   bool
	}{
		{citation{path: "docs/architecture.md", heading: "Delivery semantics"}, true},
		{citation{path: "docs/architecture.md", heading: "delivery semantics"}, true},
		{citation{path: "docs/operations.md", heading: "The operator CLI: parleyctl"}, true},
		{citation{path: "docs/flows.md", anchor: "the-run-budget"}, true},
		{citation{path: "README.md"}, true},
		{citation{path: "docs/architecture.md", heading: "No such heading"}, false},
		{citation{path: "docs/flows.md", anchor: "nowhere"}, false},
		{citation{path: "docs/architecture.md", section: "§3"}, false},
		{citation{path: "DESIGN.md", section: "§6"}, false},
		{citation{path: "HOUSE.md", heading: "Errors"}, false},
		{citation{path: "../README.md"}, false},
	}
	for _, tt := range tests {
		msg := checkCitation(root, filepath.Join(root, "pkg", "errs"), tt.give)
		if (msg == "") != tt.ok {
			t.Errorf("checkCitation(%+v) = %q, want ok=%v", tt.give, msg, tt.ok)
		}
	}
}

func TestProductSpecReferencesAreFound(t *testing.T) {
	for _, tt := range []struct {
		give string
		want bool
	}{
		{"as the specification says", true},
		{"the specification's defaults", true},
		{"(specification §8: default 200)", true},
		{"exactly as spec §2/§4", true},
		{"the spec's Button", true},
		{"RFC 6750 §3", false},
		{"the OpenAPI document", false},
		{"var spec = flow.Message", false},
	} {
		if got := productSpec.MatchString(tt.give); got != tt.want {
			t.Errorf("productSpec.MatchString(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}
