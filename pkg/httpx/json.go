package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/parleyhq/parley/pkg/errs"
)

// MaxBodyBytes bounds a request body that a route does not bound more
// tightly: what NATS carries by default (1 MiB), so that a body the gateway
// forwarded, or parleyctl sent over NATS, is never cut short behind it. The
// public API's own bound is the gateway's (docs/limits-and-errors.md
// "Request body limits").
const MaxBodyBytes = 1 << 20

// ReadBody reads all of r, at most limit bytes. A longer body is 413
// payload_too_large naming the limit: it is never decoded in part, so valid
// JSON is never called malformed for being long. A body that cannot be
// read is answered as ReadFailed says.
func ReadBody(r io.Reader, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	var tooLong *http.MaxBytesError
	switch {
	case errors.As(err, &tooLong):
		return nil, TooLarge(limit)
	case err != nil:
		return nil, ReadFailed(err)
	case int64(len(body)) > limit:
		return nil, TooLarge(limit)
	}
	return body, nil
}

// ReadFailed answers a request whose body could not be read (err from
// reading it): 408 request_timeout when it did not arrive within the
// listener's read timeout (NewServer; docs/limits-and-errors.md "Request
// body limits"), which the client can still be told before its connection
// is closed; otherwise 400 invalid_request.
func ReadFailed(err error) *errs.Error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errs.New(http.StatusRequestTimeout, errs.CodeRequestTimeout, "the request body did not arrive in time")
	}
	return errs.InvalidRequest("request body could not be read")
}

// TooLarge is 413 payload_too_large for a body over limit bytes.
func TooLarge(limit int64) *errs.Error {
	return errs.Newf(http.StatusRequestEntityTooLarge, errs.CodePayloadTooLarge, "request body too large: at most %d bytes", limit)
}

// DecodeJSON decodes one JSON value from r, at most MaxBodyBytes, into v.
// See DecodeJSONWithin.
func DecodeJSON(r io.Reader, v any) error {
	return DecodeJSONWithin(r, MaxBodyBytes, v)
}

// DecodeJSONWithin decodes one JSON value of at most limit bytes from r
// into v. A longer body is 413 payload_too_large; a body holding a NUL
// character is 400 invalid_request (StorableBody); other errors are 400
// invalid_request with a message that names the offending field.
func DecodeJSONWithin(r io.Reader, limit int64, v any) error {
	body, err := ReadBody(r, limit)
	if err != nil {
		return err
	}
	if err := StorableBody(body); err != nil {
		return err
	}
	return UnmarshalJSON(body, v)
}

// UnmarshalJSON decodes body, one JSON value, into v, as DecodeJSONWithin
// does, without its NUL check: for a body whose NUL characters are kept
// (a flow's input: a run stores its JSON as json, which can hold one).
func UnmarshalJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errs.InvalidRequest("request body must be a single JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return errs.InvalidRequest("request body must be a JSON object")
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return errs.InvalidRequest("request body must be a JSON object")
		}
		return errs.InvalidRequest("%s must be %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return errs.InvalidRequest("request body is not valid JSON")
	default:
		return errs.InvalidRequest("request body is not valid JSON: %s", err.Error())
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	case "int", "int32", "int64", "float64", "uint", "uint32", "uint64":
		return "a number"
	default:
		return fmt.Sprintf("of type %s", goKind)
	}
}
