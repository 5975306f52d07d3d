package httpx

import (
	"context"
	"errors"
	"net/url"
)

// CallFailure describes a failed outbound HTTP call (to a platform API or a
// webhook receiver) for logs and API answers. It drops the URL that Go's
// *url.Error wraps around the cause, since URLs carry credentials (a bot
// token in the path, an access token in the query), and says plainly when
// the call ran out of time.
func CallFailure(ctx context.Context, err error) string {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if uerr.Timeout() {
			return "no answer in time"
		}
		err = uerr.Err
	}
	return err.Error()
}
