// Command llm-sandbox is a local stand-in for an OpenAI-compatible LLM
// provider and moderation endpoint, for trying the flow-runner's AI nodes
// without a real model or key. It answers deterministically, says in every
// answer that it is the sandbox, and prints each request it gets (model,
// response_format, messages; or the moderation input) on one line.
//
//	go run ./e2e/cmd/llm-sandbox        # listens on 127.0.0.1:8090
//	LLM_BASE_URL=http://127.0.0.1:8090/v1 GUARD_BASE_URL=http://127.0.0.1:8090/v1 bin/flow-runner
//
// It takes any key, or none.
//
// POST /v1/chat/completions answers a fixed function of the last message
// whose role is "user" (the customer's text); the lines of every other
// message are the instructions it reads:
//
//   - Without response_format, when a line starts with "Knowledge base
//     passages:" (the ai_response node's and the assistant's system
//     message, docs/chat.md "The chat-only nodes"): an answer from the
//     passages that follow it, each a "[n] title" line then its text. Of
//     the passage holding the sentence that shares the most words (of
//     three letters or more, whatever the case) with the text, the first
//     such passage, the sentences that share as many, in order, cut at
//     300 characters: "[sandbox] From <title>: <the sentences>". When the
//     line goes on ("none matches the message") or no passage follows:
//     "[sandbox] I don't know that one; ...".
//   - Without response_format otherwise: "[sandbox] echo: <the text>",
//     its white space folded and cut at 200 characters.
//   - With response_format {"type": "json_object"} and a line that starts
//     with "intents:" (say "intents: refund, shipping"): {"intent": name},
//     the first intent, in the line's order, whose name ("_" and "-" read
//     as spaces) or one of whose examples stands in the text as whole
//     words, whatever the case; "none" when none does. Examples come from
//     the intent's own line,
//     "- refund: a description (examples: money back; return an order)".
//   - With json_object, no intents line and a line that starts with
//     "fields:" (say "fields: name, email"): an object with each field, by
//     the type its own line gives, "- email (email): a description
//     [required]" (without one, a field whose name holds "email", "phone"
//     or "date" is of that type, any other a string). email, phone and
//     date are the first one in the text, number the first number, boolean
//     yes/true/да or no/false/нет, each null when the text holds none; a
//     string is "[sandbox] <field name>".
//   - With json_object and neither line: {"answer": "[sandbox] echo: <the
//     text>"}.
//
// Every JSON answer also holds "_sandbox": true. These are the lines the
// flow-runner's intent and extract nodes write in their system message.
//
// Its usage counts words: prompt_tokens those of every message,
// completion_tokens those of the answer.
//
// POST /v1/moderations flags an input (a string, or a list of them) that
// holds one of -flag-words as whole words, whatever the case.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/parleyhq/parley/e2e/internal/sandbox"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	delay := flag.Duration("delay", 0, "added before every answer (a slow model)")
	flagWords := flag.String("flag-words", "forbidden,badword", "comma-separated words and phrases a moderation flags")
	flag.Parse()

	llm := &Sandbox{FlagWords: strings.Split(*flagWords, ","), Delay: *delay, Out: os.Stdout}
	sandbox.Serve("llm-sandbox", *addr, fmt.Sprintf("llm sandbox listening on http://%s/v1 (LLM_BASE_URL, GUARD_BASE_URL)", *addr), llm.Handler())
}
