package sse_test

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/testenv/sse"
)

// What httpx.SSE writes reads back as it was written.
func TestParseReadsWhatHTTPXWrites(t *testing.T) {
	t.Parallel()
	body := "retry: 3000\n\n" + string(httpx.EventBytes("ready", []byte("{}"))) + ": ping\n\n" +
		string(httpx.EventBytes("message", []byte("{\"a\":\n1}")))
	got, err := sse.Parse(body)
	want := []sse.Event{{Name: "ready", Data: "{}"}, {Comment: "ping"}, {Name: "message", Data: "{\"a\":\n1}"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse = %+v, %v; want %+v", got, err, want)
	}
	var v struct{ A int }
	if err := got[2].JSON(&v); err != nil || v.A != 1 {
		t.Fatalf("JSON = %+v, %v", v, err)
	}
}

func TestNextTellsACutStreamFromAnEndedOne(t *testing.T) {
	t.Parallel()
	r := sse.NewReader(strings.NewReader("event: end\ndata: {}\n\nevent: cut\ndata: {"))
	if ev, err := r.Next(); err != nil || ev.Name != "end" {
		t.Fatalf("first = %+v, %v", ev, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut stream: %v", err)
	}
	if _, err := sse.NewReader(strings.NewReader("event: end\ndata: {}\n\n")).Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := sse.Parse("bogus\n\n"); err == nil {
		t.Fatal("a line that is no field was read")
	}
}
