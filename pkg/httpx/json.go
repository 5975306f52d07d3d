package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/parleyhq/parley/pkg/errs"
)

// MaxBodyBytes bounds a JSON request body.
const MaxBodyBytes = 512 << 10

// DecodeJSON decodes one JSON value from r into v. Errors are 400
// invalid_request with a message that names the offending field.
func DecodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(io.LimitReader(r, MaxBodyBytes+1))
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
