package adapters

import (
	"context"

	"time"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// SignInLimits counts failed sign-ins in Redis, per client address and per
// account, each in its own one-minute window.
type SignInLimits struct {
	limiter    *ratelimit.Limiter
	perAddress int
	perAccount int
}

var _ app.SignInLimiter = (*SignInLimits)(nil)

// NewSignInLimits allows perAddress failures a minute from one client
// address and perAccount failures a minute on one account.
func NewSignInLimits(l *ratelimit.Limiter, perAddress, perAccount int) *SignInLimits {
	return &SignInLimits{limiter: l, perAddress: perAddress, perAccount: perAccount}
}

func (s *SignInLimits) buckets(address, account string) []ratelimit.Bucket {
	return []ratelimit.Bucket{
		{Name: "console-signin:addr:" + address, Limit: s.perAddress},
		{Name: "console-signin:account:" + account, Limit: s.perAccount},
	}
}

// Wait implements app.SignInLimiter: the longer wait of the two buckets
// that are full, zero when neither is.
func (s *SignInLimits) Wait(ctx context.Context, address, account string) (time.Duration, error) {
	var wait time.Duration
	for _, b := range s.buckets(address, account) {
		res, err := s.limiter.Peek(ctx, b.Name, b.Limit)
		if err != nil {
			return 0, err
		}
		wait = max(wait, res.RetryAfter())
	}
	return wait, nil
}

// Fail implements app.SignInLimiter.
func (s *SignInLimits) Fail(ctx context.Context, address, account string) error {
	for _, b := range s.buckets(address, account) {
		if _, err := s.limiter.Allow(ctx, b.Name, b.Limit); err != nil {
			return err
		}
	}
	return nil
}
