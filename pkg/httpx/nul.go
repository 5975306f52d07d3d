package httpx

import (
	"bytes"

	"github.com/parleyhq/parley/pkg/errs"
)

// nulEscape is how JSON writes a NUL character: the one character
// PostgreSQL's text and jsonb cannot hold, so a body that carries one
// would fail where it is stored (docs/limits-and-errors.md "Error codes").
var nulEscape = []byte(`\u0000`)

// IndexNULEscape is the offset in the JSON body of its first escaped NUL
// character (\u0000), or -1 when it has none. An escaped backslash
// followed by u0000 (the text `\\u0000`) is no NUL. A raw NUL byte is not
// looked for: JSON allows none in its strings, and decoding refuses it.
func IndexNULEscape(body []byte) int {
	for from := 0; ; {
		i := bytes.Index(body[from:], nulEscape)
		if i < 0 {
			return -1
		}
		i += from
		backslashes := 0
		for j := i - 1; j >= 0 && body[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return i
		}
		from = i + 1
	}
}

// StorableBody is 400 invalid_request for a JSON body holding an escaped
// NUL character, naming its offset, and nil for any other body. Every
// JSON body a service decodes passes it (DecodeJSONWithin), whoever sent
// it: the public API, the console, parleyctl or another service. Refused
// on arrival, a send never reaches a platform only to fail where it is
// stored.
func StorableBody(body []byte) error {
	if i := IndexNULEscape(body); i >= 0 {
		return errs.InvalidRequest("the body holds a NUL character (\\u0000) at byte %d, which cannot be stored; remove it", i)
	}
	return nil
}

// ReplaceNULEscapes is the JSON body with each escaped NUL character
// replaced by the replacement character U+FFFD (\ufffd, as long), for what
// a platform sends: a customer's message must be stored, and a NUL in it
// has no meaning to keep. body is changed in place and returned.
func ReplaceNULEscapes(body []byte) []byte {
	for {
		i := IndexNULEscape(body)
		if i < 0 {
			return body
		}
		copy(body[i:], `\ufffd`)
	}
}
