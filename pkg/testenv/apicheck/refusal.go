package apicheck

import (
	"encoding/json"
	"testing"
)

// Refusal is one request a route must refuse: what is wrong with it, the
// request (Path with its query; Body raw, "" for none) and the status and
// code its answer must have.
type Refusal struct {
	What, Method, Path, Body string
	Status                   int
	Code                     string
}

// CheckRefusal reports an error unless raw, answered with status to r,
// is r's status and code in the error shape {"code","message"}
// (docs/limits-and-errors.md "The error shape"), a message included.
func CheckRefusal(t testing.TB, r Refusal, status int, raw []byte) {
	t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal(raw, &e); err != nil || status != r.Status || e.Code != r.Code || e.Message == "" {
		t.Errorf("%s: %s %.80s = %d %.300s, want %d %s", r.What, r.Method, r.Path, status, raw, r.Status, r.Code)
	}
}
