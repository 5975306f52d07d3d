// Package knowledge is a workspace's knowledge base as the flow-runner
// keeps it: Markdown documents split into passages, which a flow's
// knowledge node searches with a customer's question. It holds the rules
// (how a document is split, which words of a question are searched for);
// the adapters store the passages and rank them.
package knowledge

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a document and its passages.
const (
	// MaxDocumentBytes bounds a document's Markdown. An upload travels in
	// one NATS message (max_payload, 1 MiB by default) as a JSON string,
	// so half of that leaves room for its escaping.
	MaxDocumentBytes = 512 << 10
	// MaxTitleRunes bounds a document's title.
	MaxTitleRunes = 200
	// MaxPassageRunes bounds a passage: about a screen of text, enough to
	// answer one question, small enough that a flow can put several in a
	// prompt. A longer paragraph is cut at sentence ends.
	MaxPassageRunes = 1200
	// MaxPassages bounds the passages of one document.
	MaxPassages = 10000
	// MaxQueryTerms bounds the words of a question that are searched for.
	MaxQueryTerms = 32
	// maxTermRunes leaves out a "word" no question holds (a pasted token).
	maxTermRunes = 64
)

// TitleSeparator joins a passage's document title and headings.
const TitleSeparator = " › "

// ValidationError is a refused document: the field (title or markdown)
// and why.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }

// Passage is one piece of a document: a paragraph (with the list or code
// block it introduces) under its headings.
type Passage struct {
	// Heading is the path of headings above the passage, TitleSeparator
	// between levels ("Returns › Refunds"); empty before the first one.
	Heading string
	// Title is the document's title followed by Heading: what a search
	// shows with the text.
	Title string
	// Text is the passage's Markdown.
	Text string
}

// Document is a document split: its title (trimmed, its spaces folded)
// and its passages in document order.
type Document struct {
	Title    string
	Passages []Passage
}

// Split checks a document and splits its Markdown into passages, in
// document order. Each heading's section is split into its paragraphs; a
// list, a code fence, a table or a quote is one paragraph, kept whole, and
// joins the paragraph before it when that one introduces it (ends with a
// colon). A paragraph longer than MaxPassageRunes is cut at sentence ends
// (a list or code at line ends). A document with no text is refused.
func Split(title string, markdown []byte) (*Document, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return nil, err
	}
	if len(markdown) > MaxDocumentBytes {
		return nil, &ValidationError{"markdown", fmt.Sprintf("is %d bytes, over the limit of %d", len(markdown), MaxDocumentBytes)}
	}
	if !utf8.Valid(markdown) {
		return nil, &ValidationError{"markdown", "is not valid UTF-8"}
	}
	if bytes.IndexByte(markdown, 0) >= 0 {
		return nil, &ValidationError{"markdown", "contains a NUL byte"}
	}
	var out []Passage
	for _, s := range parseSections(markdown) {
		heading := s.headings
		// A document commonly repeats its title as its first heading;
		// shown twice it would only lengthen every passage's title.
		if len(heading) > 0 && strings.EqualFold(heading[0], title) {
			heading = heading[1:]
		}
		p := Passage{Heading: strings.Join(heading, TitleSeparator), Title: title}
		if p.Heading != "" {
			p.Title += TitleSeparator + p.Heading
		}
		for _, text := range s.paragraphs() {
			for _, piece := range cut(text, MaxPassageRunes) {
				p.Text = piece
				out = append(out, p)
			}
		}
		if len(out) > MaxPassages {
			return nil, &ValidationError{"markdown", fmt.Sprintf("splits into more than %d passages", MaxPassages)}
		}
	}
	if len(out) == 0 {
		return nil, &ValidationError{"markdown", "has no text"}
	}
	return &Document{Title: title, Passages: out}, nil
}

// cleanTitle trims a title and folds its runs of spaces and line breaks
// into one space.
func cleanTitle(title string) (string, error) {
	if !utf8.ValidString(title) {
		return "", &ValidationError{"title", "is not valid UTF-8"}
	}
	title = strings.Join(strings.FieldsFunc(title, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	switch n := utf8.RuneCountInString(title); {
	case n == 0:
		return "", &ValidationError{"title", "is required"}
	case n > MaxTitleRunes:
		return "", &ValidationError{"title", fmt.Sprintf("is %d characters, over the limit of %d", n, MaxTitleRunes)}
	}
	return title, nil
}

// Terms returns the words of a question to search for: lower-cased runs
// of letters and digits, each once, in the order asked, at most
// MaxQueryTerms. Which of them are stop words is the search's business
// (it depends on its text search configuration).
func Terms(query string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r)
	}) {
		if seen[w] || utf8.RuneCountInString(w) > maxTermRunes {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == MaxQueryTerms {
			break
		}
	}
	return out
}
