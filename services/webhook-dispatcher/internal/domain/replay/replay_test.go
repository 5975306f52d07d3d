package replay

import (
	"errors"
	"testing"
	"time"
)

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	later := since.Add(time.Minute)
	tests := []struct {
		name      string
		give      Request
		wantField string
	}{
		{name: "since only", give: Request{WorkspaceID: "w", Since: since}},
		{name: "range and kind", give: Request{WorkspaceID: "w", Since: since, Until: &later, Event: "comment.received"}},
		{name: "no since", give: Request{WorkspaceID: "w"}, wantField: "since"},
		{name: "until equals since", give: Request{WorkspaceID: "w", Since: since, Until: &since}, wantField: "until"},
		{name: "until before since", give: Request{WorkspaceID: "w", Since: later, Until: &since}, wantField: "until"},
		{name: "test events are not on the stream", give: Request{WorkspaceID: "w", Since: since, Event: "test"}, wantField: "event"},
		{name: "unknown kind", give: Request{WorkspaceID: "w", Since: since, Event: "message.sent"}, wantField: "event"},
	}
	for _, tt := range tests {
		err := tt.give.Validate()
		var fe *FieldError
		switch {
		case tt.wantField == "" && err != nil:
			t.Errorf("%s: Validate = %v, want nil", tt.name, err)
		case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField):
			t.Errorf("%s: Validate = %v, want an error on %s", tt.name, err, tt.wantField)
		}
	}
}
