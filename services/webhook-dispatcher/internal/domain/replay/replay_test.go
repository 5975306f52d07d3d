package replay

import (
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
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

func TestDeliveryScan(t *testing.T) {
	t.Parallel()
	made := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	recorded := made.Add(3 * time.Second)
	tests := []struct {
		name      string
		event     string
		made      time.Time
		wantSince time.Time
		wantUntil time.Time
		wantErr   error
	}{
		{name: "made, stored, recorded", event: "message.received", made: made,
			wantSince: made.Add(-WindowMargin), wantUntil: recorded.Add(WindowMargin)},
		{name: "a maker's clock ahead", event: "comment.received", made: recorded.Add(time.Second),
			wantSince: recorded.Add(-WindowMargin), wantUntil: recorded.Add(time.Second + WindowMargin)},
		{name: "test event", event: "test", made: made, wantErr: ErrTestEventNotReplayable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := delivery.New("0b6a4e8a-7f57-4a5e-9d55-3f7a1ef0a001", "w", tt.event, nil, recorded)
			got, err := DeliveryScan(d, tt.made)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("DeliveryScan = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			if got.WorkspaceID != "w" || got.Event != tt.event || got.End != 0 || got.From != 0 ||
				!got.Since.Equal(tt.wantSince) || got.Until == nil || !got.Until.Equal(tt.wantUntil) {
				t.Fatalf("DeliveryScan = %+v (until %v), want %s to %s", got, got.Until, tt.wantSince, tt.wantUntil)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("the scan's request is invalid: %v", err)
			}
		})
	}
	ev := Event{ID: "0B6A4E8A-7F57-4A5E-9D55-3F7A1EF0A001"}
	if !ev.Is("0b6a4e8a-7f57-4a5e-9d55-3f7a1ef0a001") || ev.Is("0b6a4e8a-7f57-4a5e-9d55-3f7a1ef0a002") {
		t.Fatal("Event.Is compares ids wrongly")
	}
}
