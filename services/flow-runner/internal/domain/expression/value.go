package expression

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Normalize turns a value an expression produced into a JSON tree (nil, bool,
// float64, string, []any, map[string]any), refusing one whose JSON encoding
// would pass maxBytes. Expression values may share references (a list holding
// the same big string a thousand times), so the size is what an encoder
// would write, counted as the tree is copied and stopped at the bound: no
// value larger than the bound is ever built.
func Normalize(v any, maxBytes int) (any, error) {
	n := normalizer{left: maxBytes, limit: maxBytes}
	out, err := n.value(v, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SizeError reports a value over its size bound.
type SizeError struct {
	Limit int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("value larger than %d bytes", e.Limit)
}

const maxDepth = 64

type normalizer struct {
	left  int
	limit int
}

func (n *normalizer) take(size int) error {
	n.left -= size
	if n.left < 0 {
		return &SizeError{Limit: n.limit}
	}
	return nil
}

func (n *normalizer) value(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		return nil, n.take(4)
	case bool:
		return x, n.take(5)
	case string:
		return x, n.take(len(x) + 2)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("number %v has no JSON form", x)
		}
		return x, n.take(8)
	case int:
		return float64(x), n.take(8)
	case int64:
		return float64(x), n.take(8)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", x, err)
		}
		return f, n.take(len(x))
	case time.Time:
		s := x.UTC().Format(time.RFC3339Nano)
		return s, n.take(len(s) + 2)
	case time.Duration:
		s := x.String()
		return s, n.take(len(s) + 2)
	case []any:
		if err := n.take(2 + len(x)); err != nil {
			return nil, err
		}
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = n.value(e, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if err := n.take(2 + len(x)); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			if err := n.take(len(k) + 3); err != nil {
				return nil, err
			}
			var err error
			if out[k], err = n.value(e, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return n.reflected(reflect.ValueOf(v), depth)
}

// reflected covers what expr builds beside plain JSON: typed numbers, []int
// from ranges, map[any][]any from groupBy.
func (n *normalizer) reflected(rv reflect.Value, depth int) (any, error) {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), n.take(8)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), n.take(8)
	case reflect.Float32, reflect.Float64:
		return n.value(rv.Float(), depth)
	case reflect.String:
		return n.value(rv.String(), depth)
	case reflect.Bool:
		return n.value(rv.Bool(), depth)
	case reflect.Slice, reflect.Array:
		if err := n.take(2 + rv.Len()); err != nil {
			return nil, err
		}
		out := make([]any, rv.Len())
		for i := range out {
			var err error
			if out[i], err = n.value(rv.Index(i).Interface(), depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case reflect.Map:
		if err := n.take(2 + rv.Len()); err != nil {
			return nil, err
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k := fmt.Sprint(it.Key().Interface())
			if err := n.take(len(k) + 3); err != nil {
				return nil, err
			}
			var err error
			if out[k], err = n.value(it.Value().Interface(), depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return n.value(nil, depth)
		}
		return n.value(rv.Elem().Interface(), depth)
	}
	return nil, fmt.Errorf("a value of type %s has no JSON form", rv.Type())
}

// Text renders a value the way a template shows it inside a larger string:
// nothing for nil, strings as they are, numbers and everything else as JSON.
// The output never passes maxBytes.
func Text(v any, maxBytes int) (string, error) {
	if s, ok := v.(string); ok {
		if len(s) > maxBytes {
			return "", &SizeError{Limit: maxBytes}
		}
		return s, nil
	}
	if v == nil {
		return "", nil
	}
	w := boundedWriter{limit: maxBytes}
	if err := w.json(v, 0); err != nil {
		return "", err
	}
	return w.b.String(), nil
}

type boundedWriter struct {
	b     strings.Builder
	limit int
}

func (w *boundedWriter) write(s string) error {
	if w.b.Len()+len(s) > w.limit {
		return &SizeError{Limit: w.limit}
	}
	w.b.WriteString(s)
	return nil
}

func (w *boundedWriter) json(v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		return w.write("null")
	case bool:
		return w.write(strconv.FormatBool(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("number %v has no JSON form", x)
		}
		b, _ := json.Marshal(x)
		return w.write(string(b))
	case string:
		if len(x)+2 > w.limit-w.b.Len() {
			return &SizeError{Limit: w.limit}
		}
		b, _ := json.Marshal(x)
		return w.write(string(b))
	case []any:
		if err := w.write("["); err != nil {
			return err
		}
		for i, e := range x {
			if i > 0 {
				if err := w.write(","); err != nil {
					return err
				}
			}
			if err := w.json(e, depth+1); err != nil {
				return err
			}
		}
		return w.write("]")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if err := w.write("{"); err != nil {
			return err
		}
		for i, k := range keys {
			if i > 0 {
				if err := w.write(","); err != nil {
					return err
				}
			}
			if err := w.json(k, depth+1); err != nil {
				return err
			}
			if err := w.write(":"); err != nil {
				return err
			}
			if err := w.json(x[k], depth+1); err != nil {
				return err
			}
		}
		return w.write("}")
	}
	nv, err := Normalize(v, w.limit-w.b.Len())
	if err != nil {
		return err
	}
	return w.json(nv, depth)
}
