// Package configdoc holds a service's settings to their one list,
// docs/operations.md "Configuration": every variable a Config reads is
// documented there under its name, and the default written in brackets
// is the one the code takes, so that a renamed variable or an edited
// default fails the service's config test instead of an operator.
package configdoc

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/testenv/opsdoc"
)

// Setting is one documented variable: its default as the brackets after
// its name give it (the first backquoted value, "" for [empty]), and
// whether brackets were given at all.
type Setting struct {
	Default    string
	HasDefault bool
}

// guide is the one list of settings, from the repository's root.
const guide = opsdoc.Guide

// cell is one variable of a table's first column: `NAME` and, if any,
// its bracketed default.
var cell = regexp.MustCompile("`([A-Z][A-Z0-9_]+)`(?:\\s*\\[([^\\]]*)\\])?")

// Sections reads the settings documented under the given subsections of
// "Configuration" ("Every service", "gateway", ...), by variable.
func Sections(t testing.TB, sections ...string) map[string]Setting {
	t.Helper()
	out := map[string]Setting{}
	for _, rows := range opsdoc.Rows(t, "Configuration", sections...) {
		for _, row := range rows {
			for _, m := range cell.FindAllStringSubmatch(row[0], -1) {
				out[m[1]] = parseDefault(m[2], strings.Contains(m[0], "["))
			}
		}
	}
	return out
}

// parseDefault reads a bracket's text: "`24h`", "`:8080`; `127.0.0.1:8080`
// in `make run`", "empty", "empty: no provider".
func parseDefault(bracket string, given bool) Setting {
	if !given {
		return Setting{}
	}
	if strings.HasPrefix(strings.TrimSpace(bracket), "empty") {
		return Setting{Default: "", HasDefault: true}
	}
	start := strings.Index(bracket, "`")
	end := strings.Index(bracket[start+1:], "`")
	if start < 0 || end < 0 {
		return Setting{}
	}
	return Setting{Default: bracket[start+1 : start+1+end], HasDefault: true}
}

// Check holds T, a service's Config, to the settings of sections: every
// variable T reads is documented in one of them, every variable of
// own (the service's own section) is read by T, and each documented
// default loads into the same settings as no value at all. Variables of
// own read elsewhere than T (by pkg/logging, say) are listed in
// readElsewhere.
func Check[T any](t *testing.T, own string, others []string, readElsewhere ...string) {
	t.Helper()
	documented := Sections(t, append([]string{own}, others...)...)
	ownVars := Sections(t, own)
	defaults, err := config.LoadFrom[T](map[string]string{})
	if err != nil {
		t.Fatalf("defaults do not load: %v", err)
	}
	read := config.Masked(defaults)
	for name := range read {
		if _, ok := documented[name]; !ok {
			t.Errorf("%s is read but not documented in %s (sections %q, %q)", name, guide, own, others)
		}
	}
	for name := range ownVars {
		if _, ok := read[name]; !ok && !slices.Contains(readElsewhere, name) {
			t.Errorf("%s is documented in %s %q but not read", name, guide, own)
		}
	}
	for name, s := range documented {
		if _, ok := read[name]; !ok || !s.HasDefault {
			continue
		}
		given, err := config.LoadFrom[T](map[string]string{name: s.Default})
		if err != nil {
			t.Errorf("%s=%q, its documented default, does not load: %v", name, s.Default, err)
			continue
		}
		if got := config.Masked(given); !reflect.DeepEqual(got, read) {
			t.Errorf("%s: documented default %q, but the code's default is %q", name, s.Default, read[name])
		}
	}
}
