package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// maxRequestBytes bounds a request body.
const maxRequestBytes = 1 << 20

// maxEchoRunes bounds how much of the customer's message a plain answer
// repeats.
const maxEchoRunes = 200

// maxPassageAnswerRunes bounds how much of a passage a plain answer from
// the knowledge base quotes.
const maxPassageAnswerRunes = 300

// passagesKey starts the line of an ai_response system message after
// which its knowledge-base passages follow (docs/chat.md "The chat-only
// nodes"); the rest of the line, when there is one, says none matches.
const passagesKey = "Knowledge base passages:"

// Sandbox serves the sandbox's two endpoints.
type Sandbox struct {
	// FlagWords are the words and phrases a moderation flags.
	FlagWords []string
	// Delay is added before every answer.
	Delay time.Duration
	// Out gets one line per request.
	Out io.Writer

	mu sync.Mutex // one line at a time on Out
}

// Handler routes the OpenAI paths under /v1.
func (s *Sandbox) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /v1/moderations", s.moderate)
	return mux
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model          string    `json:"model"`
	Messages       []message `json:"messages"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

func (s *Sandbox) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.Messages) == 0 {
		refuse(w, "messages: at least one message is required")
		return
	}
	format := "text"
	if req.ResponseFormat != nil {
		format = req.ResponseFormat.Type
	}
	messages, _ := json.Marshal(req.Messages)
	s.printf("chat model=%s response_format=%s messages=%s", req.Model, format, messages)
	if !s.wait(r) {
		return
	}
	text := answer(req.Messages, format == "json_object")
	prompt := 0
	for _, m := range req.Messages {
		prompt += countWords(m.Content)
	}
	completion := countWords(text)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-sandbox", "object": "chat.completion", "created": 0, "model": req.Model,
		"choices": []any{map[string]any{
			"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop",
		}},
		"usage": map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

func (s *Sandbox) moderate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input json.RawMessage `json:"input"`
	}
	if !decode(w, r, &req) {
		return
	}
	// OpenAI takes one string or a list of them.
	var inputs []string
	var one string
	if err := json.Unmarshal(req.Input, &one); err == nil {
		inputs = []string{one}
	} else if err := json.Unmarshal(req.Input, &inputs); err != nil {
		refuse(w, "input: must be a string or a list of strings")
		return
	}
	results := make([]any, len(inputs))
	flags := make([]bool, len(inputs))
	for i, in := range inputs {
		flags[i] = s.flags(in)
		score := 0.0
		if flags[i] {
			score = 1
		}
		results[i] = map[string]any{
			"flagged":         flags[i],
			"categories":      map[string]bool{"sandbox": flags[i]},
			"category_scores": map[string]float64{"sandbox": score},
		}
	}
	s.printf("moderation input=%s flagged=%v", req.Input, flags)
	if !s.wait(r) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": "modr-sandbox", "model": "sandbox-moderation", "results": results})
}

func (s *Sandbox) flags(text string) bool {
	w := words(text)
	for _, f := range s.FlagWords {
		if p := words(f); strings.TrimSpace(p) != "" && strings.Contains(w, p) {
			return true
		}
	}
	return false
}

// wait holds the answer for Delay; false when the client left meanwhile.
func (s *Sandbox) wait(r *http.Request) bool {
	if s.Delay <= 0 {
		return true
	}
	t := time.NewTimer(s.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Sandbox) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.Out, format+"\n", args...)
}

// answer is the sandbox's deterministic answer to messages: see the
// package doc for the conventions it reads.
func answer(messages []message, asJSON bool) string {
	text, prompt := split(messages)
	echo := "[sandbox] echo: " + shorten(strings.Join(strings.Fields(text), " "), maxEchoRunes)
	if !asJSON {
		if passages, ok := knowledgePassages(prompt); ok {
			return answerFromPassages(text, passages)
		}
		return echo
	}
	var out map[string]any
	if names, ok := listLine(prompt, "intents:"); ok {
		out = map[string]any{"intent": pickIntent(text, names, prompt)}
	} else if names, ok := listLine(prompt, "fields:"); ok {
		out = extractFields(text, names, prompt)
	} else {
		out = map[string]any{"answer": echo}
	}
	out["_sandbox"] = true
	b, _ := json.Marshal(out)
	return string(b)
}

// split is the last user message (the customer's text) and the lines of
// every other message (the instructions).
func split(messages []message) (text string, prompt []string) {
	last := -1
	for i, m := range messages {
		if m.Role == "user" {
			last = i
		}
	}
	for i, m := range messages {
		if i == last {
			text = m.Content
			continue
		}
		prompt = append(prompt, strings.Split(m.Content, "\n")...)
	}
	return text, prompt
}

// listLine reads the first line that starts with key ("intents:"),
// whatever its case, as a comma-separated list.
func listLine(lines []string, key string) ([]string, bool) {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if len(l) < len(key) || !strings.EqualFold(l[:len(key)], key) {
			continue
		}
		var out []string
		for _, item := range strings.Split(l[len(key):], ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
		return out, true
	}
	return nil, false
}

// detail is what a "- name ..." line of the prompt says about name: the
// rest of the line, and whether there is one.
func detail(lines []string, name string) (string, bool) {
	for _, l := range lines {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "- "+name)
		if ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
			return rest, true
		}
	}
	return "", false
}

var examplesRe = regexp.MustCompile(`\(examples:\s*([^)]*)\)`)

// pickIntent is the first intent whose name, or one of whose examples,
// stands in text as whole words; "none" when no intent does.
func pickIntent(text string, names, prompt []string) string {
	w := words(text)
	for _, name := range names {
		phrases := []string{name}
		if rest, ok := detail(prompt, name); ok {
			if m := examplesRe.FindStringSubmatch(rest); m != nil {
				phrases = append(phrases, strings.Split(m[1], ";")...)
			}
		}
		for _, p := range phrases {
			if p := words(p); strings.TrimSpace(p) != "" && strings.Contains(w, p) {
				return name
			}
		}
	}
	return "none"
}

// passage is one knowledge-base passage of the prompt: its title and its
// text, white space folded.
type passage struct {
	title, text string
}

var passageHeadRe = regexp.MustCompile(`^\[\d+\]\s+(.*)$`)

// knowledgePassages reads the passages that follow the passagesKey line,
// each a "[n] title" line and then its text up to the next one; false
// when no line starts with passagesKey. A key line with more on it (the
// line saying none matches) has none.
func knowledgePassages(lines []string) ([]passage, bool) {
	start := -1
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if len(l) >= len(passagesKey) && strings.EqualFold(l[:len(passagesKey)], passagesKey) {
			if strings.TrimSpace(l[len(passagesKey):]) != "" {
				return nil, true
			}
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, false
	}
	var out []passage
	var body []string
	flush := func() {
		if len(out) > 0 {
			out[len(out)-1].text = strings.Join(strings.Fields(strings.Join(body, " ")), " ")
		}
		body = nil
	}
	for _, l := range lines[start:] {
		if m := passageHeadRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			flush()
			out = append(out, passage{title: strings.TrimSpace(m[1])})
			continue
		}
		body = append(body, l)
	}
	flush()
	return slices.DeleteFunc(out, func(p passage) bool { return p.text == "" }), true
}

// answerFromPassages answers text from the passage holding the sentence
// that shares the most words with it (the first such passage: they come
// best first), quoting that passage's sentences that share as many, in
// order; "I don't know" without passages.
func answerFromPassages(text string, passages []passage) string {
	if len(passages) == 0 {
		return "[sandbox] I don't know that one; no passage of the knowledge base matches your message. " +
			"Shall I pass you to a person?"
	}
	asked := significantWords(text)
	best, bestScore := 0, -1
	for i, p := range passages {
		for _, s := range sentences(p.text) {
			if n := shared(asked, s); n > bestScore {
				best, bestScore = i, n
			}
		}
	}
	var quote []string
	for _, s := range sentences(passages[best].text) {
		if shared(asked, s) == bestScore {
			quote = append(quote, s)
		}
	}
	return "[sandbox] From " + passages[best].title + ": " + shorten(strings.Join(quote, " "), maxPassageAnswerRunes)
}

// significantWords are the distinct words of s of three letters or more:
// shorter ones ("a", "to", "do") match nearly any sentence.
func significantWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range wordList(s) {
		if len([]rune(w)) >= 3 {
			out[w] = true
		}
	}
	return out
}

// shared counts the words of asked that sentence holds.
func shared(asked map[string]bool, sentence string) int {
	n := 0
	for w := range significantWords(sentence) {
		if asked[w] {
			n++
		}
	}
	return n
}

// sentences splits text after each ".", "!" or "?" that a space follows.
func sentences(text string) []string {
	var out []string
	rest := text
	for rest != "" {
		i := strings.IndexFunc(rest, func(r rune) bool { return r == '.' || r == '!' || r == '?' })
		for i >= 0 && i+1 < len(rest) && rest[i+1] != ' ' {
			j := strings.IndexFunc(rest[i+1:], func(r rune) bool { return r == '.' || r == '!' || r == '?' })
			if j < 0 {
				i = -1
				break
			}
			i += 1 + j
		}
		if i < 0 || i+1 >= len(rest) {
			out = append(out, strings.TrimSpace(rest))
			break
		}
		out = append(out, strings.TrimSpace(rest[:i+1]))
		rest = strings.TrimSpace(rest[i+1:])
	}
	return out
}

var (
	emailRe  = regexp.MustCompile(`[^\s@<>()"',;:]+@[^\s@<>()"',;:]+\.[\pL]{2,}`)
	phoneRe  = regexp.MustCompile(`\+?\d[\d ().-]{5,}\d`)
	numberRe = regexp.MustCompile(`-?\d+(?:\.\d+)?`)
	dateRe   = regexp.MustCompile(`\d{4}-\d{2}-\d{2}`)
	typeRe   = regexp.MustCompile(`^\s*\((\w+)\)`)
)

// extractFields fills each field by its type, from its "- name (type)"
// line or else its name: what the text obviously holds, or null; a string
// field gets a placeholder.
func extractFields(text string, names, prompt []string) map[string]any {
	out := make(map[string]any, len(names))
	for _, name := range names {
		kind := ""
		if rest, ok := detail(prompt, name); ok {
			if m := typeRe.FindStringSubmatch(rest); m != nil {
				kind = m[1]
			}
		}
		if kind == "" {
			kind = kindByName(name)
		}
		out[name] = fieldValue(text, name, kind)
	}
	return out
}

func kindByName(name string) string {
	lower := strings.ToLower(name)
	for _, k := range []string{"email", "phone", "date"} {
		if strings.Contains(lower, k) {
			return k
		}
	}
	return "string"
}

func fieldValue(text, name, kind string) any {
	switch kind {
	case "email":
		return found(emailRe.FindString(text))
	case "phone":
		return found(phoneRe.FindString(text))
	case "date":
		return found(dateRe.FindString(text))
	case "number":
		if n, err := strconv.ParseFloat(numberRe.FindString(text), 64); err == nil {
			return n
		}
		return nil
	case "boolean":
		w := words(text)
		for _, yes := range []string{" yes ", " true ", " да "} {
			if strings.Contains(w, yes) {
				return true
			}
		}
		for _, no := range []string{" no ", " false ", " нет "} {
			if strings.Contains(w, no) {
				return false
			}
		}
		return nil
	}
	return "[sandbox] " + name
}

// found is s, or null when the text held nothing of the kind.
func found(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// words is s lower-cased with each run of anything but letters, digits
// and marks turned into one space, and a space on either end, so that
// strings.Contains finds a phrase on word boundaries, in any script.
func words(s string) string {
	return " " + strings.Join(wordList(s), " ") + " "
}

func wordList(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r)
	})
}

func countWords(s string) int { return len(wordList(s)) }

func shorten(s string, max int) string {
	runes := []rune(s)
	if len(runes) <= max {
		return s
	}
	return strings.TrimRightFunc(string(runes[:max]), unicode.IsSpace) + "…"
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(v)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		refuse(w, "the request body is over 1 MiB")
		return false
	case err != nil:
		refuse(w, "the request body is not valid JSON: "+err.Error())
		return false
	}
	return true
}

// refuse answers 400 in OpenAI's error shape.
func refuse(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
		"message": "[sandbox] " + msg, "type": "invalid_request_error",
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
