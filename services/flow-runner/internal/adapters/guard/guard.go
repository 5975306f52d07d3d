// Package guard is the safety guard of the text AI nodes send (run.Guard):
// a moderation endpoint, POST {GUARD_BASE_URL}/moderations in OpenAI's
// shape, and a block list of words and phrases (GUARD_BLOCKLIST). With both
// configured, text is flagged when either flags it.
//
// The moderation endpoint gets GUARD_API_KEY as its bearer token, and only
// that key: LLM_API_KEY is never sent to it, since the guard may be another
// server than the provider. For OpenAI's moderations, set both keys.
//
// Ready answers the invoke's question "may a flow with AI nodes start?"
// (503 guard_not_wired when not) without a round trip per invoke: it
// reads the endpoint's last known state, which real checks and probes
// keep, and probes only when that state is older than CheckInterval.
package guard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/openaicompat"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// ErrNotConfigured is Ready's and Check's error when neither a moderation
// endpoint nor a block list is configured.
var ErrNotConfigured = fmt.Errorf("%w (GUARD_BASE_URL or GUARD_BLOCKLIST)", run.ErrGuardNotConfigured)

// ErrUnreachable is what Ready's error wraps when the moderation endpoint
// did not answer its last check or probe.
var ErrUnreachable = errors.New("the safety guard's moderation endpoint is unreachable")

// DefaultCheckInterval is Options.CheckInterval's default.
const DefaultCheckInterval = 10 * time.Second

// Bounds of the calls to the moderation endpoint.
const (
	// probeTimeout bounds Ready's probe, which an invoke waits for.
	probeTimeout = 2 * time.Second
	// probeText is the probe's input: harmless, so the probe is never a
	// flagged text in the provider's own records.
	probeText = "hello"
	// checkTimeout bounds one Check: a moderation answers in well under a
	// second, and a hung endpoint must not take a run's whole budget.
	checkTimeout = 10 * time.Second
)

// Options configure a Guard.
type Options struct {
	// BaseURL is GUARD_BASE_URL ("https://api.openai.com/v1"); empty: no
	// moderation endpoint.
	BaseURL string
	// APIKey is GUARD_API_KEY, sent as a bearer token; empty sends none.
	APIKey string
	// BlockList is GUARD_BLOCKLIST: words and phrases, matched on word
	// boundaries whatever their case, in any script.
	BlockList []string
	// CheckInterval is GUARD_CHECK_INTERVAL: how long the endpoint's last
	// known state answers Ready; zero means DefaultCheckInterval.
	CheckInterval time.Duration
	// HTTP makes the calls; nil means openaicompat.NewHTTPClient().
	HTTP *http.Client
	Log  *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Guard implements run.Guard. It is safe for concurrent use.
type Guard struct {
	// moderation is nil when no endpoint is configured.
	moderation *openaicompat.Endpoint
	// blocked holds the block list's entries as words(entry).
	blocked       []string
	checkInterval time.Duration
	log           *zap.Logger
	now           func() time.Time

	probes singleflight.Group
	mu     sync.Mutex
	// checkedAt is when the endpoint last answered or failed a check or
	// a probe (zero: never), and lastErr how (nil: it answered).
	checkedAt time.Time
	lastErr   error
}

var _ run.Guard = (*Guard)(nil)

// New returns a Guard. With neither an endpoint nor a block list, Ready
// and Check answer ErrNotConfigured.
func New(o Options) *Guard {
	g := &Guard{checkInterval: o.CheckInterval, log: o.Log, now: o.Now}
	if o.BaseURL != "" {
		g.moderation = &openaicompat.Endpoint{BaseURL: o.BaseURL, APIKey: o.APIKey, HTTP: o.HTTP}
		if g.moderation.HTTP == nil {
			g.moderation.HTTP = openaicompat.NewHTTPClient()
		}
	}
	for _, entry := range o.BlockList {
		// An entry without a letter or digit (a stray comma) could
		// never match a word.
		if w := words(entry); strings.TrimSpace(w) != "" {
			g.blocked = append(g.blocked, w)
		}
	}
	if g.checkInterval <= 0 {
		g.checkInterval = DefaultCheckInterval
	}
	if g.log == nil {
		g.log = zap.NewNop()
	}
	if g.now == nil {
		g.now = time.Now
	}
	return g
}

// Check implements run.Guard: the block list first, since it costs no
// call, then the moderation endpoint. An endpoint that cannot answer is an
// error even when the block list passed the text: it was not checked as
// configured.
func (g *Guard) Check(ctx context.Context, text string) (bool, error) {
	if g.moderation == nil && len(g.blocked) == 0 {
		return false, ErrNotConfigured
	}
	if g.onBlockList(text) {
		return true, nil
	}
	if g.moderation == nil {
		return false, nil
	}
	flagged, err := g.moderate(ctx, checkTimeout, text)
	if err != nil {
		return false, fmt.Errorf("safety guard: %w", err)
	}
	return flagged, nil
}

// Ready reports whether the guard can check text now: nil with a block
// list (it needs nothing outside) or when the moderation endpoint answered
// within CheckInterval; ErrNotConfigured with neither; an error wrapping
// ErrUnreachable when the endpoint failed its last check or probe. When the
// last known state is older than CheckInterval, Ready probes the endpoint
// (at most probeTimeout), and callers that ask meanwhile wait for that one
// probe; a caller whose ctx ends first gets ctx's error.
func (g *Guard) Ready(ctx context.Context) error {
	switch {
	case len(g.blocked) > 0:
		return nil
	case g.moderation == nil:
		return ErrNotConfigured
	}
	if fresh, err := g.known(); fresh {
		return err
	}
	probe := g.probes.DoChan("probe", func() (any, error) {
		// The probe serves every caller waiting for it, so it outlives
		// the first one's ctx.
		_, err := g.moderate(context.WithoutCancel(ctx), probeTimeout, probeText)
		return nil, err
	})
	select {
	case res := <-probe:
		return readiness(res.Err)
	case <-ctx.Done():
		return fmt.Errorf("safety guard: %w", ctx.Err())
	}
}

// known is the endpoint's last known state, and whether it is recent
// enough to answer Ready.
func (g *Guard) known() (fresh bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.checkedAt.IsZero() || g.now().Sub(g.checkedAt) >= g.checkInterval {
		return false, nil
	}
	return true, readiness(g.lastErr)
}

func readiness(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnreachable, err)
}

type moderationRequest struct {
	Input string `json:"input"`
}

type moderationReply struct {
	Results []struct {
		Flagged bool `json:"flagged"`
	} `json:"results"`
}

// moderate asks the endpoint about text within limit and records how it
// went for Ready, unless parent ended first (a run out of time, a client
// gone), which says nothing about the endpoint.
func (g *Guard) moderate(parent context.Context, limit time.Duration, text string) (bool, error) {
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	var reply moderationReply
	err := g.moderation.Post(ctx, "/moderations", moderationRequest{Input: text}, &reply)
	if err == nil && len(reply.Results) == 0 {
		err = errors.New("the reply has no results")
	}
	if err == nil || parent.Err() == nil {
		g.record(err)
	}
	if err != nil {
		return false, err
	}
	for _, r := range reply.Results {
		if r.Flagged {
			return true, nil
		}
	}
	return false, nil
}

func (g *Guard) record(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if (err == nil) != (g.lastErr == nil) {
		if err != nil {
			g.log.Warn("safety guard unreachable", zap.String("reason", err.Error()))
		} else if !g.checkedAt.IsZero() {
			g.log.Info("safety guard reachable again")
		}
	}
	g.checkedAt, g.lastErr = g.now(), err
}

// onBlockList reports whether text holds a block-list entry as whole
// words.
func (g *Guard) onBlockList(text string) bool {
	if len(g.blocked) == 0 {
		return false
	}
	w := words(text)
	for _, entry := range g.blocked {
		if strings.Contains(w, entry) {
			return true
		}
	}
	return false
}

// words is s lower-cased with each run of anything but letters, digits
// and marks turned into one space, and a space on either end: a phrase
// then holds as whole words exactly when words(text) contains
// words(phrase). Unicode's classes make it work in Cyrillic as in Latin.
func words(s string) string {
	fields := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r)
	})
	return " " + strings.Join(fields, " ") + " "
}
