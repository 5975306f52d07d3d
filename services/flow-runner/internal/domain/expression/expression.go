// Package expression compiles and evaluates the expressions and templates of
// flow definitions.
//
// Expressions are expr-lang/expr programs over one environment, {vars}: the
// run's variables and nothing else (no functions of the host, no I/O). They
// are compiled once, when a definition is parsed, and evaluated many times.
// Evaluation is bounded three ways. expr's memory budget caps the elements
// ranges, arrays, maps and predicate loops create. The operations that could
// grow a string or list geometrically (`+` on strings, repeat, replace, join,
// concat, flatten, toJSON, toBase64, string) are replaced by versions that
// refuse a result over MaxStringBytes before building it. And a meter, passed
// in the environment, is ticked by every call and every predicate iteration
// (the compiler wraps them): it charges the size of what each produced,
// refusing more than MaxEvalBytes, and stops an evaluation running longer
// than MaxEvalTime, so that a loop of expensive steps (`all(1..900000,
// upper(vars.big) != "")`) ends within one step of the limit. Member access is nil-safe (`vars.order.body.status` is nil when
// vars.order is missing), so that a template reached on an error path renders
// empty instead of failing. Every failure is an error, never a panic.
package expression

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
	exprruntime "github.com/expr-lang/expr/vm/runtime"
)

const (
	// MaxStringBytes bounds any string or JSON text an expression or a
	// template produces.
	MaxStringBytes = 1 << 20
	// MaxListLen bounds any list concat or flatten produces.
	MaxListLen = 100_000
	// MemoryBudget is expr's allocation budget per evaluation (its units:
	// roughly one per element of every array, map and loop scope).
	MemoryBudget = 1_000_000
	// MaxSourceBytes bounds the source of one expression.
	MaxSourceBytes = 16 << 10
	// MaxEvalBytes bounds what the calls and predicate iterations of one
	// evaluation produce, counted by the meter.
	MaxEvalBytes = 32 << 20
	// MaxEvalTime bounds one evaluation's running time.
	MaxEvalTime = 2 * time.Second
)

// Program is one compiled expression, safe for concurrent use.
type Program struct {
	source  string
	program *vm.Program
}

// Source returns the expression as written.
func (p *Program) Source() string { return p.source }

// Error is a failure to compile or evaluate an expression.
type Error struct {
	Source string
	Err    error
}

func (e *Error) Error() string {
	msg := strings.ReplaceAll(e.Err.Error(), "\n", " ")
	return fmt.Sprintf("expression %q: %s", e.Source, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// compileEnv declares the one name an expression may use; its type (a map of
// anything) keeps member access unchecked, since vars are only known at run
// time, while an unknown top-level name is refused at publish.
var compileEnv = map[string]any{"vars": map[string]any{}, meterName: &meter{}}

var options = buildOptions()

// amplifiers are builtins whose result may be far larger than their
// arguments; each is replaced by a bounded version below.
var amplifiers = map[string]func(args ...any) (any, error){
	"repeat":   safeRepeat,
	"replace":  safeReplace,
	"join":     safeJoin,
	"concat":   safeConcat,
	"flatten":  safeFlatten,
	"toJSON":   safeToJSON,
	"toBase64": safeToBase64,
	"string":   safeString,
}

// disabled builtins reach outside the expression (timezone reads the
// system's zone database).
var disabled = []string{"timezone"}

func buildOptions() []expr.Option {
	opts := []expr.Option{
		expr.Env(compileEnv),
		expr.MaxNodes(2000),
		expr.Patch(safetyPatcher{}),
		expr.Function(addFunc, safeAdd),
		expr.Function(divideFunc, safeDivide),
		expr.Function(moduloFunc, safeModulo),
		expr.Function(tickFunc, tick),
	}
	for name, fn := range amplifiers {
		opts = append(opts, expr.DisableBuiltin(name), expr.Function(name, fn))
	}
	for _, name := range disabled {
		opts = append(opts, expr.DisableBuiltin(name))
	}
	return opts
}

const (
	addFunc    = "__add"
	divideFunc = "__divide"
	moduloFunc = "__modulo"
	tickFunc   = "__tick"
	meterName  = "__meter"
)

// safetyPatcher rewrites the tree before it is compiled: `a + b` becomes a
// bounded call, `a / b` and `a % b` calls that refuse a zero divisor (and
// take the float64s a run's numbers are), every call and every predicate
// body is passed through the meter, and member access is nil-safe.
type safetyPatcher struct{}

func metered(n ast.Node) ast.Node {
	return &ast.CallNode{
		Callee:    &ast.IdentifierNode{Value: tickFunc},
		Arguments: []ast.Node{&ast.IdentifierNode{Value: meterName}, n},
	}
}

func (safetyPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		switch n.Operator {
		case "+":
			ast.Patch(node, metered(&ast.CallNode{
				Callee:    &ast.IdentifierNode{Value: addFunc},
				Arguments: []ast.Node{n.Left, n.Right},
			}))
		case "/", "%":
			fn := divideFunc
			if n.Operator == "%" {
				fn = moduloFunc
			}
			ast.Patch(node, &ast.CallNode{
				Callee:    &ast.IdentifierNode{Value: fn},
				Arguments: []ast.Node{n.Left, n.Right},
			})
		}
	case *ast.MemberNode:
		if !n.Method {
			n.Optional = true
			ast.Patch(node, &ast.ChainNode{Node: n})
		}
	case *ast.CallNode:
		// A method call keeps its plain callee: the chain wrapper is for
		// values, not for calls.
		if ch, ok := n.Callee.(*ast.ChainNode); ok {
			if m, ok := ch.Node.(*ast.MemberNode); ok {
				m.Optional = false
				n.Callee = m
			}
		}
		ast.Patch(node, metered(n))
	case *ast.BuiltinNode:
		ast.Patch(node, metered(n))
	case *ast.PredicateNode:
		n.Node = metered(n.Node)
	}
}

// meter counts one evaluation's work. It has no exported fields or methods:
// an expression that names it can only pass it around.
type meter struct {
	start time.Time
	ticks int
	bytes int
}

// tick charges one step's result and checks the evaluation's bounds; it
// returns the result unchanged.
func tick(args ...any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("%s takes two arguments", tickFunc)
	}
	m, ok := args[0].(*meter)
	if !ok || m == nil {
		return nil, fmt.Errorf("%s: no meter", tickFunc)
	}
	v := args[1]
	m.ticks++
	switch x := v.(type) {
	case string:
		m.bytes += len(x)
	case []any:
		m.bytes += 16 * len(x)
	case map[string]any:
		m.bytes += 64 * len(x)
	default:
		m.bytes += 8
	}
	if m.bytes > MaxEvalBytes {
		return nil, fmt.Errorf("the expression produces more than %d bytes", MaxEvalBytes)
	}
	// The clock is read every 8 steps: often enough that steps of a
	// millisecond or more (a megabyte's upper) cannot overrun by much.
	if m.ticks%8 == 0 && time.Since(m.start) > MaxEvalTime {
		return nil, fmt.Errorf("the expression runs longer than %s", MaxEvalTime)
	}
	return v, nil
}

// Compile compiles one expression.
func Compile(source string) (*Program, error) {
	if strings.TrimSpace(source) == "" {
		return nil, &Error{Source: source, Err: errors.New("empty expression")}
	}
	if len(source) > MaxSourceBytes {
		return nil, &Error{Source: source[:32] + "…", Err: fmt.Errorf("longer than %d bytes", MaxSourceBytes)}
	}
	p, err := compile(source)
	if err != nil {
		return nil, &Error{Source: source, Err: err}
	}
	return &Program{source: source, program: p}, nil
}

func compile(source string) (p *vm.Program, err error) {
	// expr's compiler is not meant to panic, but its input is a stranger's.
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("cannot compile: %v", r)
		}
	}()
	return expr.Compile(source, options...)
}

// Eval runs the program over vars and returns its value as a JSON tree
// (see Normalize), at most MaxStringBytes large when encoded.
func (p *Program) Eval(vars map[string]any) (any, error) {
	v, err := p.run(vars)
	if err != nil {
		return nil, err
	}
	out, err := Normalize(v, MaxStringBytes)
	if err != nil {
		return nil, &Error{Source: p.source, Err: err}
	}
	return out, nil
}

// EvalBool runs the program and reads its value as a condition: only true is
// true; nil, false and every other value are false.
func (p *Program) EvalBool(vars map[string]any) (bool, error) {
	v, err := p.run(vars)
	if err != nil {
		return false, err
	}
	b, _ := v.(bool)
	return b, nil
}

func (p *Program) run(vars map[string]any) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, &Error{Source: p.source, Err: fmt.Errorf("%v", r)}
		}
	}()
	if vars == nil {
		vars = map[string]any{}
	}
	machine := vm.VM{MemoryBudget: MemoryBudget}
	v, err = machine.Run(p.program, map[string]any{"vars": vars, meterName: &meter{start: time.Now()}})
	if err != nil {
		return nil, &Error{Source: p.source, Err: err}
	}
	return v, nil
}

func tooLong() error { return &SizeError{Limit: MaxStringBytes} }

func safeAdd(args ...any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("+ takes two operands")
	}
	if a, ok := args[0].(string); ok {
		if b, ok := args[1].(string); ok {
			if len(a)+len(b) > MaxStringBytes {
				return nil, tooLong()
			}
			return a + b, nil
		}
	}
	return add(args[0], args[1])
}

func add(a, b any) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return exprruntime.Add(a, b), nil
}

// errDivisionByZero is a / or % by zero: an error that fails the node
// (docs/flows.md "Expressions and templates"), not an infinity a comparison
// could take for a number.
var errDivisionByZero = errors.New("division by zero")

// safeDivide is a / b, a float64 as expr's own; a zero b is an error.
func safeDivide(args ...any) (any, error) {
	a, b, err := operands("/", args)
	if err != nil {
		return nil, err
	}
	if b == 0 {
		return nil, errDivisionByZero
	}
	return a / b, nil
}

// safeModulo is a % b. expr's own takes integers only, while every number
// of a run's variables is a float64 (JSON's numbers): whole numbers give
// what integers would, and a zero b is an error.
func safeModulo(args ...any) (any, error) {
	if len(args) == 2 {
		if a, ok := args[0].(int); ok {
			if b, ok := args[1].(int); ok && b != 0 {
				return a % b, nil
			}
		}
	}
	a, b, err := operands("%", args)
	if err != nil {
		return nil, err
	}
	if b == 0 {
		return nil, errDivisionByZero
	}
	return math.Mod(a, b), nil
}

// operands reads the two numbers of an arithmetic operator.
func operands(op string, args []any) (a, b float64, err error) {
	if len(args) != 2 {
		return 0, 0, fmt.Errorf("%s takes two operands", op)
	}
	a, okA := number(args[0])
	b, okB := number(args[1])
	if !okA || !okB {
		return 0, 0, fmt.Errorf("invalid operation: %T %s %T", args[0], op, args[1])
	}
	return a, b, nil
}

// number is v as a float64 when it is a number.
func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch {
	case rv.CanFloat():
		return rv.Float(), true
	case rv.CanInt():
		return float64(rv.Int()), true
	case rv.CanUint():
		return float64(rv.Uint()), true
	}
	return 0, false
}

func argString(args []any, i int, fn string) (string, error) {
	if i >= len(args) {
		return "", fmt.Errorf("%s: missing argument %d", fn, i+1)
	}
	s, ok := args[i].(string)
	if !ok {
		return "", fmt.Errorf("%s: argument %d is %T, not a string", fn, i+1, args[i])
	}
	return s, nil
}

func argInt(args []any, i int, fn string) (int, error) {
	if i >= len(args) {
		return 0, fmt.Errorf("%s: missing argument %d", fn, i+1)
	}
	switch n := args[i].(type) {
	case int:
		return n, nil
	case float64:
		if n != float64(int(n)) {
			return 0, fmt.Errorf("%s: argument %d is not a whole number", fn, i+1)
		}
		return int(n), nil
	}
	rv := reflect.ValueOf(args[i])
	if rv.CanInt() {
		return int(rv.Int()), nil
	}
	return 0, fmt.Errorf("%s: argument %d is %T, not a number", fn, i+1, args[i])
}

func argList(v any, fn string) ([]any, error) {
	if l, ok := v.([]any); ok {
		return l, nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, fmt.Errorf("%s: %T is not a list", fn, v)
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, nil
}

func safeRepeat(args ...any) (any, error) {
	s, err := argString(args, 0, "repeat")
	if err != nil {
		return nil, err
	}
	n, err := argInt(args, 1, "repeat")
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("repeat: negative count %d", n)
	}
	if n > 0 && len(s) > MaxStringBytes/n {
		return nil, tooLong()
	}
	return strings.Repeat(s, n), nil
}

func safeReplace(args ...any) (any, error) {
	if len(args) != 3 && len(args) != 4 {
		return nil, fmt.Errorf("replace takes 3 or 4 arguments, got %d", len(args))
	}
	s, err := argString(args, 0, "replace")
	if err != nil {
		return nil, err
	}
	old, err := argString(args, 1, "replace")
	if err != nil {
		return nil, err
	}
	repl, err := argString(args, 2, "replace")
	if err != nil {
		return nil, err
	}
	n := -1
	if len(args) == 4 {
		if n, err = argInt(args, 3, "replace"); err != nil {
			return nil, err
		}
	}
	count := strings.Count(s, old)
	if old == "" {
		count = utf8.RuneCountInString(s) + 1
	}
	if n >= 0 && n < count {
		count = n
	}
	if len(s)+count*(len(repl)-len(old)) > MaxStringBytes {
		return nil, tooLong()
	}
	return strings.Replace(s, old, repl, n), nil
}

func safeJoin(args ...any) (any, error) {
	if len(args) != 1 && len(args) != 2 {
		return nil, fmt.Errorf("join takes 1 or 2 arguments, got %d", len(args))
	}
	list, err := argList(args[0], "join")
	if err != nil {
		return nil, err
	}
	glue := ""
	if len(args) == 2 {
		if glue, err = argString(args, 1, "join"); err != nil {
			return nil, err
		}
	}
	parts := make([]string, len(list))
	total := 0
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("join: element %d is %T, not a string", i, e)
		}
		total += len(s) + len(glue)
		if total > MaxStringBytes+len(glue) {
			return nil, tooLong()
		}
		parts[i] = s
	}
	return strings.Join(parts, glue), nil
}

func safeConcat(args ...any) (any, error) {
	total := 0
	lists := make([][]any, len(args))
	for i, a := range args {
		l, err := argList(a, "concat")
		if err != nil {
			return nil, err
		}
		total += len(l)
		if total > MaxListLen {
			return nil, fmt.Errorf("concat: more than %d elements", MaxListLen)
		}
		lists[i] = l
	}
	out := make([]any, 0, total)
	for _, l := range lists {
		out = append(out, l...)
	}
	return out, nil
}

func safeFlatten(args ...any) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("flatten takes 1 argument, got %d", len(args))
	}
	var out []any
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		if depth > maxDepth {
			return fmt.Errorf("flatten: nested deeper than %d levels", maxDepth)
		}
		rv := reflect.ValueOf(v)
		if v == nil || (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) {
			if len(out) >= MaxListLen {
				return fmt.Errorf("flatten: more than %d elements", MaxListLen)
			}
			out = append(out, v)
			return nil
		}
		for i := 0; i < rv.Len(); i++ {
			if err := walk(rv.Index(i).Interface(), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	l, err := argList(args[0], "flatten")
	if err != nil {
		return nil, err
	}
	for _, e := range l {
		if err := walk(e, 1); err != nil {
			return nil, err
		}
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

func safeToJSON(args ...any) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("toJSON takes 1 argument, got %d", len(args))
	}
	w := boundedWriter{limit: MaxStringBytes}
	if err := w.json(args[0], 0); err != nil {
		return nil, err
	}
	return w.b.String(), nil
}

func safeToBase64(args ...any) (any, error) {
	s, err := argString(args, 0, "toBase64")
	if err != nil {
		return nil, err
	}
	if base64.StdEncoding.EncodedLen(len(s)) > MaxStringBytes {
		return nil, tooLong()
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func safeString(args ...any) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("string takes 1 argument, got %d", len(args))
	}
	if args[0] == nil {
		return "nil", nil
	}
	return Text(args[0], MaxStringBytes)
}
