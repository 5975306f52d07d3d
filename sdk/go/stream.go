package parley

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
)

// RunEvent is one event of a streamed run: *RunStart, *NodeStart,
// *RunMessage, *NodeEnd or *RunEnd. Switch on its type:
//
//	switch ev := ev.(type) {
//	case *parley.RunMessage:
//		fmt.Println(ev.Text)
//	case *parley.RunEnd:
//		fmt.Println(ev.Status)
//	}
type RunEvent interface {
	// Event returns the event's name on the stream ("run_start",
	// "node_start", "message", "node_end" or "end").
	Event() string
}

// RunStart is the first event: the run started.
type RunStart struct {
	// RunID is the run; Client.Run reads its trace.
	RunID string `json:"run_id"`
}

// NodeStart is a node starting. A node stopped by the run budget gets a
// NodeStart at once followed by a NodeEnd with its Error; it did not run.
type NodeStart struct {
	NodeID string `json:"node_id"`
	// Type is the node's type ("start", "question", "llm", …).
	Type string `json:"type"`
}

// RunMessage is a message the flow "sent" (never sent to a customer), as
// InvokeResult.Messages holds them.
type RunMessage struct {
	FlowMessage
}

// NodeEnd is a node ending; pair it with its NodeStart by NodeID.
type NodeEnd struct {
	NodeID string `json:"node_id"`
	Type   string `json:"type"`
	// MS is the node's duration in milliseconds.
	MS     int `json:"ms"`
	Tokens int `json:"tokens"`
	// Error is empty when the node succeeded; set on a node stopped by the
	// run budget.
	Error string `json:"error,omitempty"`
}

// RunEnd is the last event: the call's outcome, as InvokeResult without
// RunID and Messages (those came as events).
type RunEnd struct {
	Status RunStatus `json:"status"`
	// SessionID is set only while the run waits.
	SessionID string         `json:"session_id,omitempty"`
	Output    map[string]any `json:"output"`
	Usage     Usage          `json:"usage"`
	// Error is set only when the run failed.
	Error *RunError `json:"error,omitempty"`
}

// Event returns "run_start".
func (*RunStart) Event() string { return "run_start" }

// Event returns "node_start".
func (*NodeStart) Event() string { return "node_start" }

// Event returns "message".
func (*RunMessage) Event() string { return "message" }

// Event returns "node_end".
func (*NodeEnd) Event() string { return "node_end" }

// Event returns "end".
func (*RunEnd) Event() string { return "end" }

// newEvent returns an empty event of the named kind; nil for a name this
// client does not know.
func newEvent(name string) RunEvent {
	switch name {
	case "run_start":
		return new(RunStart)
	case "node_start":
		return new(NodeStart)
	case "message":
		return new(RunMessage)
	case "node_end":
		return new(NodeEnd)
	case "end":
		return new(RunEnd)
	}
	return nil
}

// InvokeStream runs the flow as Invoke does and yields the run's events as
// they happen: RunStart, then for each node NodeStart, its RunMessages and
// NodeEnd, then RunEnd, after which the sequence ends. The request is made
// when the loop starts.
//
// An error before the run starts (a refusal, a lost connection) is
// yielded once as Invoke would return it, after the same retries. A
// stream that stops before RunEnd yields an error matching
// ErrStreamDropped: the run is stored failed, so call again with a new
// Idempotency-Key. Breaking out of the loop closes the connection at once,
// which stops the run (it is stored failed).
//
// A call repeated with the Idempotency-Key of a finished one is answered
// with the stored JSON result, not a stream: InvokeStream then yields it
// as RunStart, one RunMessage per message and RunEnd (no node events).
func (c *Client) InvokeStream(ctx context.Context, flowID string, input any, opts ...CallOption) iter.Seq2[RunEvent, error] {
	return c.stream(ctx, flowID, invokeBody(input, ""), opts)
}

// ContinueStream continues the waiting run of sessionID with text, as
// Continue does, and yields its events as InvokeStream does.
func (c *Client) ContinueStream(ctx context.Context, flowID, sessionID, text string, opts ...CallOption) iter.Seq2[RunEvent, error] {
	if err := checkID("session id", sessionID); err != nil {
		return failed(err)
	}
	return c.stream(ctx, flowID, invokeBody(map[string]any{"text": text}, sessionID), opts)
}

func failed(err error) iter.Seq2[RunEvent, error] {
	return func(yield func(RunEvent, error) bool) { yield(nil, err) }
}

func (c *Client) stream(ctx context.Context, flowID string, body InvokeRequest, opts []CallOption) iter.Seq2[RunEvent, error] {
	if err := checkID("flow id", flowID); err != nil {
		return failed(err)
	}
	body.Stream = true
	call := c.keyed(invokePath(flowID), body, opts)
	call.stream = true
	return func(yield func(RunEvent, error) bool) {
		r := *call // each loop its own: send records its attempts in it
		resp, err := c.send(ctx, &r)
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if isEventStream(resp) {
			readEvents(ctx, resp.Body, c.maxAnswer, yield)
			return
		}
		// A replay: the stored JSON answer of the first call with this key.
		var res InvokeResult
		raw, err := io.ReadAll(resp.Body) // in memory already (send)
		if err == nil {
			err = decodeAnswer(raw, &res)
		}
		if err != nil {
			yield(nil, r.fail(fmt.Errorf("%w: POST %s: decode the answer: %w", ErrMalformedAnswer, r.path, err)))
			return
		}
		replayEvents(&res, yield)
	}
}

// replayEvents yields a stored InvokeResult as the events a stream would
// have carried, the node events aside.
func replayEvents(res *InvokeResult, yield func(RunEvent, error) bool) {
	if !yield(&RunStart{RunID: res.RunID}, nil) {
		return
	}
	for _, m := range res.Messages {
		if !yield(&RunMessage{FlowMessage: m}, nil) {
			return
		}
	}
	yield(&RunEnd{Status: res.Status, SessionID: res.SessionID, Output: res.Output, Usage: res.Usage, Error: res.Error}, nil)
}

// readEvents parses Server-Sent Events from body and yields each known
// event until the end event, the caller's break or the stream's loss. It
// follows the event-stream format of the HTML standard ("Server-sent
// events", docs/client.md "Streaming a run"): lines end at CRLF, LF or a
// bare CR (lineReader), a leading byte order mark is skipped, comment lines
// (": ping") are skipped, as are the fields other than event and data (id,
// retry) and events of names this client does not know; a field without a
// colon has an empty value, one space after the colon is dropped, several
// data lines of one event join with "\n", and an event without data is not
// dispatched. A line, or an event's data, over limit bytes ends the stream
// with an error, as does an event whose data is not its JSON: the
// connection is then closed, which stops the run.
func readEvents(ctx context.Context, body io.Reader, limit int64, yield func(RunEvent, error) bool) {
	lines := newLineReader(body, limit)
	var name string
	var data strings.Builder
	var hasData bool
	for {
		line, err := lines.next()
		if errors.Is(err, ErrMalformedAnswer) {
			yield(nil, fmt.Errorf("%w: %w", ErrStreamDropped, err))
			return
		}
		if err != nil {
			// A last line without its line end is not a whole event either.
			yield(nil, dropped(ctx, err))
			return
		}
		switch {
		case line == "":
			if !hasData {
				name = ""
				continue
			}
			ev := newEvent(name)
			if name == "" {
				ev = newEvent("message")
			}
			payload := data.String()
			name, hasData = "", false
			data.Reset()
			if ev == nil {
				continue
			}
			if err := decodeAnswer([]byte(payload), ev); err != nil {
				yield(nil, fmt.Errorf("%w: %w: the %s event's data: %w", ErrStreamDropped, ErrMalformedAnswer, ev.Event(), err))
				return
			}
			if !yield(ev, nil) {
				return
			}
			if _, end := ev.(*RunEnd); end {
				return
			}
		case strings.HasPrefix(line, ":"):
			// A comment, such as the server's ": ping".
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				name = value
			case "data":
				if hasData {
					data.WriteByte('\n')
				}
				data.WriteString(value)
				hasData = true
				if int64(data.Len()) > limit {
					yield(nil, fmt.Errorf("%w: %w: an event over %d bytes", ErrStreamDropped, ErrMalformedAnswer, limit))
					return
				}
			}
		}
	}
}

// byteOrderMark is U+FEFF in UTF-8: an event stream may start with one.
const byteOrderMark = "\uFEFF"

// lineReader splits an event stream into its lines, which end at CRLF, LF
// or a bare CR, whatever the reads the bytes come in.
type lineReader struct {
	br    *bufio.Reader
	limit int64
	// started is set once the leading byte order mark, if any, is skipped.
	started bool
	// afterCR: the last line ended at a CR, so an LF next is the rest of
	// its line end (CRLF), not an empty line. It is looked at only when
	// the next line is asked for: a line is returned at its CR, without
	// waiting for a byte that may be long in coming.
	afterCR bool
}

func newLineReader(r io.Reader, limit int64) *lineReader {
	return &lineReader{br: bufio.NewReader(r), limit: limit}
}

// next returns the next line without its line end. A line of more than
// limit bytes is an error wrapping ErrMalformedAnswer, read no further. At
// the end of the stream it returns the reader's error (io.EOF), and drops
// a last line that has no line end.
func (lr *lineReader) next() (string, error) {
	if !lr.started {
		lr.started = true
		// A 3-byte wait at most, before the first line: no event is that
		// short.
		if b, err := lr.br.Peek(len(byteOrderMark)); err == nil && string(b) == byteOrderMark {
			lr.br.Discard(len(byteOrderMark))
		}
	}
	if lr.afterCR {
		lr.afterCR = false
		b, err := lr.br.ReadByte()
		if err != nil {
			return "", err
		}
		if b != '\n' {
			lr.br.UnreadByte()
		}
	}
	var line []byte
	for {
		if lr.br.Buffered() == 0 {
			if _, err := lr.br.Peek(1); err != nil {
				return "", err
			}
		}
		buf, _ := lr.br.Peek(lr.br.Buffered())
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			i = len(buf)
		}
		if int64(len(line)+i) > lr.limit {
			return "", fmt.Errorf("%w: a line over %d bytes", ErrMalformedAnswer, lr.limit)
		}
		line = append(line, buf[:i]...)
		if i < len(buf) {
			lr.afterCR = buf[i] == '\r'
			lr.br.Discard(i + 1)
			return string(line), nil
		}
		lr.br.Discard(i)
	}
}

// dropped is the error of a stream lost before its end event.
func dropped(ctx context.Context, cause error) error {
	if ctx.Err() != nil {
		cause = ctx.Err()
	}
	if errors.Is(cause, io.EOF) {
		return ErrStreamDropped
	}
	return fmt.Errorf("%w: %w", ErrStreamDropped, cause)
}
