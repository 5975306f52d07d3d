package knowledge

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The Markdown read here is CommonMark's block structure, as much of it as
// splitting needs: ATX and setext headings, paragraphs, lists (loose ones
// too), code fences, thematic breaks and front matter. Everything else
// (tables, quotes, HTML, indented code) is kept as written within its
// paragraph.

// section is a heading's text: the blocks between it and the next heading.
type section struct {
	headings []string
	blocks   []block
}

// block is a run of lines a blank line ends (a list goes on past blank
// lines while its items do, a code fence until it closes).
type block struct {
	lines []string
	// structured is a block whose line breaks mean something (a list, a
	// code fence, a table, a quote), kept as written; the lines of a plain
	// paragraph are wrapped text and become one line.
	structured bool
	list       bool
}

func (b block) text() string {
	if b.structured {
		return strings.Trim(strings.Join(b.lines, "\n"), "\n")
	}
	words := make([]string, 0, len(b.lines))
	for _, l := range b.lines {
		if l = strings.TrimSpace(l); l != "" {
			words = append(words, l)
		}
	}
	return strings.Join(words, " ")
}

// paragraphs are the section's passages before any is cut to length: one
// per block, except that a list, code or table joins the paragraph that
// introduces it with a colon, while the two fit in one passage.
func (s section) paragraphs() []string {
	var (
		out     []string
		lastLen int // runes of the last paragraph
	)
	for _, b := range s.blocks {
		text := strings.TrimSpace(b.text())
		if text == "" {
			continue
		}
		n := utf8.RuneCountInString(text)
		if last := len(out) - 1; last >= 0 && b.structured && strings.HasSuffix(out[last], ":") && lastLen+2+n <= MaxPassageRunes {
			out[last] += "\n\n" + text
			lastLen += 2 + n
			continue
		}
		out = append(out, text)
		lastLen = n
	}
	return out
}

// parser reads a document line by line into sections.
type parser struct {
	sections []section
	// headings holds the open heading of each level (index level-1), ""
	// for a level skipped.
	headings []string
	cur      block
	// fence is the marker of the open code fence, "" outside one.
	fence string
	// blankInList is a blank line seen inside a list: the next line says
	// whether the list goes on.
	blankInList bool
}

func parseSections(markdown []byte) []section {
	text := strings.TrimPrefix(string(markdown), "\uFEFF")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	p := &parser{sections: []section{{}}}
	for _, l := range skipFrontMatter(strings.Split(text, "\n")) {
		p.line(strings.TrimRightFunc(l, unicode.IsSpace))
	}
	p.flush()
	return p.sections
}

func (p *parser) line(l string) {
	if p.fence != "" {
		p.cur.lines = append(p.cur.lines, l)
		if closesFence(l, p.fence) {
			p.fence = ""
		}
		return
	}
	if l == "" {
		if p.cur.list {
			p.blankInList = true
			return
		}
		p.flush()
		return
	}
	if p.blankInList {
		p.blankInList = false
		if !isListItem(l) && indent(l) < 2 {
			p.flush()
		} else {
			p.cur.lines = append(p.cur.lines, "")
		}
	}
	if marker := openingFence(l, p.cur.list); marker != "" {
		p.cur.structured = true
		p.cur.lines = append(p.cur.lines, l)
		p.fence = marker
		return
	}
	if level, text, ok := atxHeading(l); ok {
		p.flush()
		p.heading(level, text)
		return
	}
	if level := setextLevel(l); level > 0 && len(p.cur.lines) > 0 && !p.cur.structured {
		text := p.cur.text()
		p.cur = block{}
		p.heading(level, text)
		return
	}
	if thematicBreak(l) {
		p.flush()
		return
	}
	switch {
	case isListItem(l):
		p.cur.list, p.cur.structured = true, true
	case len(p.cur.lines) == 0 && indent(l) >= 4, strings.HasPrefix(strings.TrimLeft(l, " "), "|"), strings.HasPrefix(strings.TrimLeft(l, " "), ">"):
		p.cur.structured = true
	}
	p.cur.lines = append(p.cur.lines, l)
}

// heading opens a section under the headings of the levels above level.
func (p *parser) heading(level int, text string) {
	for len(p.headings) < level-1 {
		p.headings = append(p.headings, "")
	}
	p.headings = append(p.headings[:level-1], strings.Join(strings.Fields(text), " "))
	var path []string
	for _, h := range p.headings {
		if h != "" {
			path = append(path, h)
		}
	}
	p.sections = append(p.sections, section{headings: path})
}

func (p *parser) flush() {
	if len(p.cur.lines) > 0 {
		s := &p.sections[len(p.sections)-1]
		s.blocks = append(s.blocks, p.cur)
	}
	p.cur, p.blankInList = block{}, false
}

// skipFrontMatter drops a YAML front matter block ("---" first, then
// key: value lines, then "---" or "..."): metadata, not text.
func skipFrontMatter(lines []string) []string {
	if len(lines) == 0 || lines[0] != "---" {
		return lines
	}
	for i := 1; i < len(lines); i++ {
		l := lines[i]
		switch {
		case i > 1 && (l == "---" || l == "..."):
			return lines[i+1:]
		case strings.TrimSpace(l) == "", strings.HasPrefix(l, "#"), indent(l) > 0, strings.HasPrefix(l, "- "), yamlKey(l):
		default:
			return lines
		}
	}
	return lines
}

func yamlKey(l string) bool {
	key, _, ok := strings.Cut(l, ":")
	return ok && key != "" && strings.IndexFunc(key, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-'
	}) < 0
}

// indent counts a line's leading columns, a tab as four.
func indent(l string) int {
	n := 0
	for _, r := range l {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}

// atxHeading reads "## Text ##": up to three spaces, one to six #, then a
// space or the end.
func atxHeading(l string) (level int, text string, ok bool) {
	if indent(l) > 3 {
		return 0, "", false
	}
	rest := strings.TrimLeft(l, " ")
	for level < len(rest) && rest[level] == '#' {
		level++
	}
	if level == 0 || level > 6 || (level < len(rest) && rest[level] != ' ' && rest[level] != '\t') {
		return 0, "", false
	}
	text = strings.TrimSpace(rest[level:])
	// A closing run of # is decoration when a space comes before it.
	if trimmed := strings.TrimRight(text, "#"); trimmed == "" || strings.HasSuffix(trimmed, " ") || strings.HasSuffix(trimmed, "\t") {
		text = strings.TrimSpace(trimmed)
	}
	return level, text, true
}

// setextLevel is 1 for a line of =, 2 for a line of -, else 0.
func setextLevel(l string) int {
	if indent(l) > 3 {
		return 0
	}
	switch t := strings.TrimSpace(l); {
	case strings.Trim(t, "=") == "":
		return 1
	case strings.Trim(t, "-") == "":
		return 2
	}
	return 0
}

// thematicBreak is three or more of one of - * _, spaces allowed between.
func thematicBreak(l string) bool {
	if indent(l) > 3 {
		return false
	}
	t := strings.Join(strings.Fields(l), "")
	return len(t) >= 3 && (strings.Trim(t, "-") == "" || strings.Trim(t, "*") == "" || strings.Trim(t, "_") == "")
}

// isListItem is a bullet (- * +) or an ordered marker (1. or 1)) followed
// by a space or the end, at any depth.
func isListItem(l string) bool {
	t := strings.TrimLeft(l, " \t")
	if t == "" {
		return false
	}
	rest := ""
	switch t[0] {
	case '-', '*', '+':
		rest = t[1:]
	default:
		digits := 0
		for digits < len(t) && digits < 10 && t[digits] >= '0' && t[digits] <= '9' {
			digits++
		}
		if digits == 0 || digits > 9 || digits == len(t) || (t[digits] != '.' && t[digits] != ')') {
			return false
		}
		rest = t[digits+1:]
	}
	return rest == "" || rest[0] == ' ' || rest[0] == '\t'
}

// openingFence returns the marker of a line opening a code fence (three or
// more ` or ~), "" for any other line. Inside a list a fence may be
// indented as its item is.
func openingFence(l string, inList bool) string {
	if !inList && indent(l) > 3 {
		return ""
	}
	t := strings.TrimLeft(l, " \t")
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || (t[0] == '`' && strings.Contains(t[n:], "`")) {
		return ""
	}
	return t[:n]
}

// closesFence is a line of at least as many of the fence's characters and
// nothing else.
func closesFence(l, marker string) bool {
	t := strings.TrimSpace(l)
	return len(t) >= len(marker) && strings.Trim(t, marker[:1]) == ""
}

// cut splits text into pieces of at most limit runes: at line ends, then
// at sentence ends, then between words, and a word longer than limit at
// limit runes. Each piece is trimmed; none is empty.
func cut(text string, limit int) []string {
	var out []string
	for _, piece := range cutFrom(text, limit, 0) {
		if piece = strings.TrimSpace(piece); piece != "" {
			out = append(out, piece)
		}
	}
	return out
}

// splitters are cut's ways of splitting text, coarsest first, with what
// joins the pieces again.
var splitters = []struct {
	split func(string) []string
	sep   string
}{
	{func(s string) []string { return strings.Split(s, "\n") }, "\n"},
	{sentences, " "},
	{strings.Fields, " "},
}

func cutFrom(text string, limit, level int) []string {
	if utf8.RuneCountInString(text) <= limit {
		return []string{text}
	}
	for ; level < len(splitters); level++ {
		pieces := splitters[level].split(text)
		if len(pieces) < 2 {
			continue
		}
		sep := splitters[level].sep
		var (
			out []string
			b   strings.Builder
			n   int
		)
		for _, piece := range pieces {
			if strings.TrimSpace(piece) == "" {
				continue
			}
			for _, part := range cutFrom(piece, limit, level+1) {
				m := utf8.RuneCountInString(part)
				if n > 0 && n+len(sep)+m > limit {
					out = append(out, b.String())
					b.Reset()
					n = 0
				}
				if n > 0 {
					b.WriteString(sep)
					n += len(sep)
				}
				b.WriteString(part)
				n += m
			}
		}
		if n > 0 {
			out = append(out, b.String())
		}
		return out
	}
	// One word longer than limit: cut between runes.
	var out []string
	runes := []rune(text)
	for len(runes) > limit {
		out = append(out, string(runes[:limit]))
		runes = runes[limit:]
	}
	return append(out, string(runes))
}

// sentences splits text after each . ! ? or … (with the quotes or
// brackets closing after it) that a space follows.
func sentences(text string) []string {
	var out []string
	start := 0
	runes := []rune(text)
	pos := 0 // byte offset of runes[i]
	for i := 0; i < len(runes); i++ {
		size := utf8.RuneLen(runes[i])
		if strings.ContainsRune(".!?…", runes[i]) {
			j, end := i+1, pos+size
			for j < len(runes) && strings.ContainsRune(`"')]»”’`, runes[j]) {
				end += utf8.RuneLen(runes[j])
				j++
			}
			if j < len(runes) && unicode.IsSpace(runes[j]) {
				out = append(out, strings.TrimSpace(text[start:end]))
				start = end
			}
		}
		pos += size
	}
	if rest := strings.TrimSpace(text[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}
