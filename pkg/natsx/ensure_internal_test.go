package natsx

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A cluster in motion is waited for; a refusal is not.
func TestTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"not placed yet", fmt.Errorf("stream x: %w", errNotPlaced), true},
		{"a request timed out", context.DeadlineExceeded, true},
		{"no responders", nats.ErrNoResponders, true},
		{"disconnected", nats.ErrConnectionReconnecting, true},
		{"stream being moved", jetstream.ErrStreamNotFound, true},
		{"no meta leader", &jetstream.APIError{Code: 500, ErrorCode: 10009}, true},
		{"no suitable peers", &jetstream.APIError{Code: 400, ErrorCode: 10005}, true},
		{"stopping", context.Canceled, false},
		{"no such consumer", jetstream.ErrConsumerNotFound, false},
		{"replicas on a single server", &jetstream.APIError{Code: 500, ErrorCode: 10074}, false},
		{"consumer replicas above the stream's", &jetstream.APIError{Code: 400, ErrorCode: 10126}, false},
		{"something else", errors.New("boom"), false},
	}
	for _, tt := range tests {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("%s: transient(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
