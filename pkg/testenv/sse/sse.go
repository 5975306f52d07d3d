// Package sse reads a text/event-stream as a client does, for tests: the
// webchat widget's stream, a streamed flow run, relayed or not; and, with
// Silent, does not read one, as a stalled client does.
package sse

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Event is one event of a stream, or one comment line (": ping"), which
// has Comment set and no Name.
type Event struct {
	Name string
	// Data is the event's data lines joined by newlines.
	Data    string
	Comment string
}

// JSON decodes the event's data into v.
func (e Event) JSON(v any) error {
	if err := json.Unmarshal([]byte(e.Data), v); err != nil {
		return fmt.Errorf("event %s: data %q: %w", e.Name, e.Data, err)
	}
	return nil
}

// Reader reads a stream's events one at a time.
type Reader struct {
	r *bufio.Reader
}

// NewReader reads the stream r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReader(r)} }

// Next returns the next event or comment. It returns io.EOF when the
// stream ended between events, io.ErrUnexpectedEOF when it ended inside
// one, and an error for a line that is not an event-stream field this
// project writes (event, data, retry, a comment).
func (r *Reader) Next() (Event, error) {
	var ev Event
	var data []string
	for {
		line, err := r.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && (line != "" || ev.Name != "" || data != nil) {
				err = io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if ev.Name == "" && data == nil {
				continue // a block of fields such as retry only
			}
			ev.Data = strings.Join(data, "\n")
			return ev, nil
		case strings.HasPrefix(line, ":"):
			if ev.Name == "" && data == nil {
				return Event{Comment: strings.TrimSpace(strings.TrimPrefix(line, ":"))}, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, "retry: "):
		default:
			return Event{}, fmt.Errorf("unexpected line %q in an event stream", line)
		}
	}
}

// Parse reads a whole stream: its events, comments included, in order.
func Parse(body string) ([]Event, error) {
	r := NewReader(strings.NewReader(body))
	var out []Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}
