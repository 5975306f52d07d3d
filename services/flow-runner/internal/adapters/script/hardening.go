package script

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// hardening bounds the built-ins of one runtime (see the package comment)
// and keeps the originals it needs for itself.
type hardening struct {
	vm         *goja.Runtime
	l          Limits
	rangeError goja.Value
	stringify  goja.Callable
	parseJSON  goja.Callable
	toString   goja.Callable
}

// removed are the globals that allocate their whole length in one call
// and that JSON-like scripts have no use for.
var removed = []string{
	"ArrayBuffer", "SharedArrayBuffer", "DataView",
	"Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array",
	"Int32Array", "Uint32Array", "Float16Array", "Float32Array", "Float64Array",
	"BigInt64Array", "BigUint64Array",
	"GoError", // goja's wrapper for Go errors: nothing from Go is exposed
}

func newHardening(vm *goja.Runtime, l Limits) *hardening {
	jsonObj := vm.Get("JSON").ToObject(vm)
	stringify, _ := goja.AssertFunction(jsonObj.Get("stringify"))
	parseJSON, _ := goja.AssertFunction(jsonObj.Get("parse"))
	toString, _ := goja.AssertFunction(vm.Get("String"))
	return &hardening{vm: vm, l: l, rangeError: vm.Get("RangeError"), stringify: stringify, parseJSON: parseJSON, toString: toString}
}

// parse makes vars from their JSON: a copy the script may change freely.
func (h *hardening) parse(varsJSON string) (goja.Value, error) {
	v, err := h.parseJSON(goja.Undefined(), h.vm.ToValue(varsJSON))
	if err != nil {
		return nil, &Error{Kind: KindInternal, Message: "vars could not be copied into the script: " + err.Error()}
	}
	return v, nil
}

// compile makes function(vars) { code }. The code is parsed first and must
// be exactly that function's body: goja's Function constructor, like
// wrapping by hand, would let code such as "}); (function () {" close the
// function early and run outside it.
func (h *hardening) compile(code string) (goja.Callable, error) {
	prog, err := parser.ParseFile(nil, "", "(function (vars) {\n"+code+"\n})", 0)
	if err != nil {
		msg := lineRE.ReplaceAllStringFunc(strings.TrimPrefix(err.Error(), "(anonymous): "), func(m string) string {
			n, _ := strconv.Atoi(lineRE.FindStringSubmatch(m)[1])
			return "Line " + strconv.Itoa(codeLine(n))
		})
		return nil, &Error{Kind: KindSyntax, Message: "syntax error: " + msg}
	}
	if !oneFunction(prog) {
		return nil, &Error{Kind: KindSyntax, Message: "syntax error: the code closes its function early"}
	}
	p, err := goja.CompileAST(prog, false)
	if err != nil {
		return nil, &Error{Kind: KindSyntax, Message: "syntax error: " + err.Error()}
	}
	v, err := h.vm.RunProgram(p)
	if err != nil {
		return nil, err
	}
	fn, _ := goja.AssertFunction(v)
	return fn, nil
}

// oneFunction reports a program that is one function expression and
// nothing else.
func oneFunction(prog *ast.Program) bool {
	if len(prog.Body) != 1 {
		return false
	}
	st, ok := prog.Body[0].(*ast.ExpressionStatement)
	if !ok {
		return false
	}
	_, ok = st.Expression.(*ast.FunctionLiteral)
	return ok
}

// The code is compiled after one line, "(function (vars) {".
const bodyOffset = 1

var lineRE = regexp.MustCompile(`Line (\d+)`)

// codeLine is the line of the script's code that line n of the compiled
// function is.
func codeLine(n int) int { return max(n-bodyOffset, 1) }

// install removes and bounds the built-ins.
func (h *hardening) install() error {
	global := h.vm.GlobalObject()
	for _, name := range removed {
		if err := global.Delete(name); err != nil {
			return err
		}
	}
	str := h.object("String", "prototype")
	for _, name := range str.GetOwnPropertyNames() {
		if err := h.wrap(str, name, h.stringCheck(name)); err != nil {
			return err
		}
	}
	arr := h.object("Array", "prototype")
	for _, name := range arr.GetOwnPropertyNames() {
		if err := h.wrap(arr, name, h.arrayCheck(name)); err != nil {
			return err
		}
	}
	// Symbol.iterator is values under another key.
	if err := h.wrapSymbol(arr, goja.SymIterator, h.arrayCheck("values")); err != nil {
		return err
	}
	argsAt := func(i int) check {
		return func(_ goja.Value, args []goja.Value) []goja.Value {
			h.checkArrayLike(arg(args, i))
			return nil
		}
	}
	for _, w := range []struct {
		obj   *goja.Object
		name  string
		check check
	}{
		{h.object("Array"), "from", argsAt(0)},
		{h.object("Function", "prototype"), "apply", argsAt(1)},
		{h.object("Reflect"), "apply", argsAt(2)},
		{h.object("Reflect"), "construct", argsAt(1)},
		{h.object("JSON"), "stringify", func(_ goja.Value, args []goja.Value) []goja.Value {
			if err := h.checkJSON(arg(args, 0), arg(args, 2), h.l.MaxStringLength); err != nil {
				h.throw("JSON.stringify: the value %s", err)
			}
			return nil
		}},
	} {
		if err := h.wrap(w.obj, w.name, w.check); err != nil {
			return err
		}
	}
	return nil
}

// maxThrownChars bounds how much of a thrown value's text an error keeps.
const maxThrownChars = 1024

// exception turns what the script threw into an *Error: the thrown value's
// text and where in the code it was thrown, never the Go frames of the
// sandbox's own natives. The text comes from the String function as it was
// before the script ran, inside the runtime, so a thrown value whose
// toString throws or loops is still under the watchdog. Uncatchable errors
// (the interrupt, a stack overflow) pass through.
func (h *hardening) exception(err error) error {
	var ex *goja.Exception
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	if !errors.As(err, &ex) || errors.As(err, &ie) || errors.As(err, &so) {
		return err
	}
	text, serr := h.toString(goja.Undefined(), ex.Value())
	if serr != nil {
		var ie *goja.InterruptedError
		if errors.As(serr, &ie) {
			return serr
		}
		text = h.vm.ToValue("a value that cannot be shown as text")
	}
	msg := text.String()
	if len(msg) > maxThrownChars {
		msg = strings.ToValidUTF8(msg[:maxThrownChars], "") + "…"
	}
	msg = "script threw: " + msg
	for _, f := range ex.Stack() {
		if p := f.Position(); p.Line > 0 && f.SrcName() == "" {
			msg += fmt.Sprintf(" (line %d)", codeLine(p.Line))
			break
		}
	}
	return &Error{Kind: KindException, Message: msg}
}

// export turns the script's return value into JSON, nil for undefined (a
// function or a symbol too, as JSON.stringify drops them).
func (h *hardening) export(v goja.Value) (json.RawMessage, error) {
	if v == nil || goja.IsUndefined(v) {
		return nil, nil
	}
	if err := h.checkJSON(v, goja.Undefined(), h.l.MaxResultBytes); err != nil {
		return nil, &Error{Kind: KindResult, Message: "script result " + err.Error()}
	}
	s, err := h.stringify(goja.Undefined(), v)
	if err != nil {
		return nil, err
	}
	if goja.IsUndefined(s) {
		return nil, nil
	}
	text := s.String()
	if len(text) > h.l.MaxResultBytes {
		return nil, &Error{Kind: KindResult, Message: fmt.Sprintf("script result is larger than %s as JSON", size(uint64(h.l.MaxResultBytes)))}
	}
	if !json.Valid([]byte(text)) {
		return nil, &Error{Kind: KindResult, Message: "script result is not JSON-like"}
	}
	return json.RawMessage(text), nil
}

// A check runs before a wrapped built-in. It throws (h.throw) to refuse the
// call, and may return replacement arguments (nil keeps them).
type check func(this goja.Value, args []goja.Value) []goja.Value

// wrap replaces obj[name], when it is a function, by a native function that
// runs c and then the original. Natives, not JavaScript, so a script cannot
// reach the originals by tampering with Function.prototype.
func (h *hardening) wrap(obj *goja.Object, name string, c check) error {
	if name == "constructor" || c == nil {
		return nil
	}
	orig, ok := goja.AssertFunction(obj.Get(name))
	if !ok {
		return nil
	}
	return obj.DefineDataProperty(name, h.wrapped(orig, c), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

func (h *hardening) wrapSymbol(obj *goja.Object, sym *goja.Symbol, c check) error {
	orig, ok := goja.AssertFunction(obj.GetSymbol(sym))
	if !ok {
		return nil
	}
	return obj.DefineDataPropertySymbol(sym, h.wrapped(orig, c), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

func (h *hardening) wrapped(orig goja.Callable, c check) goja.Value {
	return h.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		args := call.Arguments
		if replaced := c(call.This, args); replaced != nil {
			args = replaced
		}
		v, err := orig(call.This, args...)
		if err != nil {
			panic(err) // rethrown as it was: an exception, or the interrupt
		}
		return v
	})
}

// stringCheck bounds String.prototype[name]: the receiver's length always,
// and the result's where one call can multiply it.
func (h *hardening) stringCheck(name string) check {
	return func(this goja.Value, args []goja.Value) []goja.Value {
		n := h.stringLength(this)
		h.checkString(float64(n))
		switch name {
		case "repeat":
			h.checkString(float64(n) * arg(args, 0).ToFloat())
		case "padStart", "padEnd":
			h.checkString(arg(args, 0).ToFloat())
		case "concat":
			total := float64(n)
			for _, a := range args {
				total += float64(h.stringLength(a))
			}
			h.checkString(total)
		case "replace", "replaceAll":
			return h.checkReplace(name, this, args)
		}
		return nil
	}
}

// checkReplace bounds a replace's result: n matches, each replaced by the
// replacement with every $-pattern in it as long as the whole string at
// most. A replacement function is wrapped to count what it returns.
func (h *hardening) checkReplace(name string, this goja.Value, args []goja.Value) []goja.Value {
	s := this.String()
	pattern, repl := arg(args, 0), arg(args, 1)
	if fn, ok := goja.AssertFunction(repl); ok {
		total := float64(len(s))
		counted := h.vm.ToValue(func(call goja.FunctionCall) goja.Value {
			v, err := fn(call.This, call.Arguments...)
			if err != nil {
				panic(err)
			}
			total += float64(h.stringLength(v))
			h.checkString(total)
			return v
		})
		return []goja.Value{pattern, counted}
	}
	matches := float64(len(s) + 1)
	if p, ok := pattern.Export().(string); ok {
		switch {
		case name == "replace":
			matches = 1
		case p != "":
			matches = float64(strings.Count(s, p))
		}
	} else if obj, ok := pattern.(*goja.Object); ok && !strings.Contains(obj.Get("flags").String(), "g") {
		matches = 1
	}
	r := repl.String()
	perMatch := float64(len(r)) + float64(strings.Count(r, "$"))*float64(len(s))
	h.checkString(float64(len(s)) + matches*perMatch)
	return nil
}

// arrayCheck bounds Array.prototype[name]: the receiver's length always,
// concat's result, and join's estimated output.
func (h *hardening) arrayCheck(name string) check {
	return func(this goja.Value, args []goja.Value) []goja.Value {
		n := h.checkArrayLike(this)
		switch name {
		case "concat":
			total := n
			for _, a := range args {
				if obj, ok := a.(*goja.Object); ok && obj.ClassName() == "Array" {
					total += h.arrayLength(obj)
				}
			}
			h.checkArray(total)
		case "join", "toString", "toLocaleString":
			sep := 1.0
			if name == "join" && !goja.IsUndefined(arg(args, 0)) {
				sep = float64(h.stringLength(arg(args, 0)))
			}
			budget := h.l.MaxArrayLength
			est := h.joinEstimate(this, sep, 0, &budget)
			h.checkString(est)
		}
		return nil
	}
}

// joinEstimate is about how long this joined would be; nested arrays join
// too. It throws when the walk goes deeper than MaxDepth or visits more
// than MaxArrayLength elements in all.
func (h *hardening) joinEstimate(this goja.Value, sep float64, depth int, budget *int) float64 {
	obj, ok := this.(*goja.Object)
	if !ok {
		return 0
	}
	if depth > h.l.MaxDepth {
		h.throw("arrays nested deeper than %d cannot be joined in the sandbox", h.l.MaxDepth)
	}
	n := int(h.arrayLength(obj))
	*budget -= n
	if *budget < 0 {
		h.throw("arrays of more than %d elements in all cannot be joined in the sandbox", h.l.MaxArrayLength)
	}
	est := float64(max(n-1, 0)) * sep
	for i := range n {
		el := obj.Get(fmt.Sprint(i))
		switch v := el.(type) {
		case nil:
		case *goja.Object:
			if v.ClassName() == "Array" {
				est += h.joinEstimate(v, 1, depth+1, budget)
			} else {
				est += 16 // "[object Object]"; a custom toString is not foreseen
			}
		default:
			if goja.IsString(v) {
				est += float64(h.stringLength(v))
			} else {
				est += 24
			}
		}
	}
	return est
}

// checkJSON walks v as JSON.stringify would, refusing nesting deeper than
// MaxDepth and an output estimated over limit (space is stringify's third
// argument: indentation repeats per level).
func (h *hardening) checkJSON(v, space goja.Value, limit int) error {
	indent := 0.0
	if space != nil && !goja.IsUndefined(space) {
		if goja.IsString(space) {
			indent = math.Min(10, float64(h.stringLength(space)))
		} else {
			indent = math.Min(10, math.Max(0, space.ToFloat()))
		}
	}
	nodes, total := 0, 0.0
	var walk func(v goja.Value, depth int) error
	walk = func(v goja.Value, depth int) error {
		nodes++
		if nodes > h.l.MaxArrayLength {
			return fmt.Errorf("holds more than %d values", h.l.MaxArrayLength)
		}
		total += 1 + indent*float64(depth)
		if total > float64(limit) {
			return fmt.Errorf("is larger than %s as JSON", size(uint64(limit)))
		}
		obj, ok := v.(*goja.Object)
		if !ok {
			if goja.IsString(v) {
				total += float64(h.stringLength(v)) + 2
			} else {
				total += 24
			}
			return nil
		}
		if depth >= h.l.MaxDepth {
			return fmt.Errorf("is nested deeper than %d levels", h.l.MaxDepth)
		}
		if _, isFn := goja.AssertFunction(obj); isFn {
			return nil
		}
		if obj.ClassName() == "Array" {
			n := int(h.arrayLength(obj))
			if n > h.l.MaxArrayLength {
				return fmt.Errorf("holds more than %d values", h.l.MaxArrayLength)
			}
			for i := range n {
				if err := walk(obj.Get(fmt.Sprint(i)), depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		for _, k := range obj.Keys() {
			total += float64(len(k)) + 3
			if err := walk(obj.Get(k), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(v, 0)
}

// checkArrayLike refuses an array-like longer than MaxArrayLength and
// returns its length.
func (h *hardening) checkArrayLike(v goja.Value) float64 {
	obj, ok := v.(*goja.Object)
	if !ok {
		return 0
	}
	n := h.arrayLength(obj)
	h.checkArray(n)
	return n
}

func (h *hardening) arrayLength(obj *goja.Object) float64 {
	l := obj.Get("length")
	if l == nil {
		return 0
	}
	return l.ToFloat()
}

func (h *hardening) checkArray(n float64) {
	if n > float64(h.l.MaxArrayLength) {
		h.throw("an array of %.0f elements is longer than the %d the sandbox allows in one call", n, h.l.MaxArrayLength)
	}
}

func (h *hardening) checkString(n float64) {
	if n > float64(h.l.MaxStringLength) {
		h.throw("a string of %.0f characters is longer than the %d the sandbox allows in one call", n, h.l.MaxStringLength)
	}
}

// stringLength is a string value's JavaScript length, without copying it.
func (h *hardening) stringLength(v goja.Value) int {
	if v == nil || !goja.IsString(v) {
		if obj, ok := v.(*goja.Object); ok && obj.ClassName() == "String" {
			return int(h.arrayLength(obj))
		}
		return 0
	}
	return int(v.ToObject(h.vm).Get("length").ToInteger())
}

// throw refuses a call with a RangeError the script may catch: nothing has
// been allocated yet.
func (h *hardening) throw(format string, a ...any) {
	obj, err := h.vm.New(h.rangeError, h.vm.ToValue(fmt.Sprintf(format, a...)))
	if err != nil {
		panic(err)
	}
	panic(obj)
}

func (h *hardening) object(path ...string) *goja.Object {
	v := h.vm.Get(path[0]).ToObject(h.vm)
	for _, p := range path[1:] {
		v = v.Get(p).ToObject(h.vm)
	}
	return v
}

func arg(args []goja.Value, i int) goja.Value {
	if i < len(args) {
		return args[i]
	}
	return goja.Undefined()
}
