package http

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/gateway/internal/app"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// The deprecated base address (docs/api.md "Requests and keys"): it answers like
// /v1 and says so. The date is the change-log entry that moved the base to
// /v1 (2026-09-18), in RFC 9745 form.
const legacyPrefix = "/api/v1"

var deprecation = "@" + strconv.FormatInt(time.Date(2026, 9, 18, 0, 0, 0, 0, time.UTC).Unix(), 10)

// Public is the Developer API.
type Public struct {
	app     *app.App
	limiter *ratelimit.Limiter
	fwd     *forwarder
	metrics *Metrics
	log     *zap.Logger
	// authFailures bounds failed authentications per client address and
	// minute (AUTH_FAILURES_PER_MINUTE); proxies say who the client is
	// (TRUSTED_PROXIES).
	authFailures int
	proxies      httpx.Proxies
}

// DefaultAuthFailuresPerMinute is AUTH_FAILURES_PER_MINUTE's default.
const DefaultAuthFailuresPerMinute = 30

// PublicOption changes a default of NewPublic.
type PublicOption func(*Public)

// WithAuthFailuresPerMinute bounds the failed authentications (401s) one
// client address may have per minute; past it, its requests are refused
// with 429 before any key is looked up.
func WithAuthFailuresPerMinute(n int) PublicOption { return func(p *Public) { p.authFailures = n } }

// WithProxies trusts these proxies to name the client (X-Forwarded-For);
// without, the client is the connection's peer.
func WithProxies(proxies httpx.Proxies) PublicOption { return func(p *Public) { p.proxies = proxies } }

// NewPublic returns the Developer API. maxPayload is the NATS server's
// largest message (nats.Conn.MaxPayload); requests that would not fit are
// refused with 413 instead of failing in the client.
func NewPublic(a *app.App, limiter *ratelimit.Limiter, client *rpc.Client, maxPayload int64, metrics *Metrics, log *zap.Logger, opts ...PublicOption) *Public {
	p := &Public{
		app:          a,
		limiter:      limiter,
		fwd:          &forwarder{client: client, maxPayload: maxPayload, metrics: metrics, log: log},
		metrics:      metrics,
		log:          log,
		authFailures: DefaultAuthFailuresPerMinute,
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Mount adds /v1 and /api/v1 to e (an httpx.NewEcho, whose request-id
// middleware has already given every request its X-Request-Id), and the
// API's description, which needs no key: /v1/openapi.json and the /docs
// page (docs.go).
func (p *Public) Mount(e *echo.Echo) {
	newReference().mount(e)
	for _, g := range []*echo.Group{
		e.Group("/v1", p.observe, p.authenticate, p.rateLimit),
		e.Group(legacyPrefix, deprecated, p.observe, p.authenticate, p.rateLimit),
	} {
		g.Any("", p.serve)
		g.Any("/*", p.serve)
	}
}

// deprecated marks every answer under /api/v1, errors included, and points
// to the same resource under /v1.
func deprecated(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Deprecation", deprecation)
		h.Add("Link", fmt.Sprintf("<%s>; rel=\"successor-version\"", v1Path(c.Request().URL.EscapedPath())))
		return next(c)
	}
}

// observe counts each request by route group and final status. It renders
// errors itself (as httpx's access log does) so that the status is known.
func (p *Public) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := next(c); err != nil {
			c.Error(err)
		}
		p.metrics.requests.WithLabelValues(groupOf(c.Request().URL.EscapedPath()), strconv.Itoa(c.Response().Status)).Inc()
		return nil
	}
}

const ctxWorkspace = "parley.workspace"

func workspaceOf(c echo.Context) account.Workspace {
	w, _ := c.Get(ctxWorkspace).(account.Workspace)
	return w
}

// authenticate admits requests with a valid Bearer key of a workspace whose
// plan includes developer_api. Every key looked up costs a database query,
// so a client address with authFailures failed authentications this minute
// is refused (429 rate_limited, Retry-After) before its key is looked up,
// valid or not, until the minute ends. Only failures count: a client with
// a good key is never slowed by this. The 401s themselves are unchanged by
// the count, so they tell a prober nothing about it. Failures are counted
// once they happen, so requests already in flight may pass the bound by
// their number: it bounds the rate of lookups, not an exact count.
func (p *Public) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		bucket := "authfail:" + httpx.LimitKey(p.proxies.ClientAddr(r))
		seen, err := p.limiter.Peek(r.Context(), bucket, p.authFailures)
		if err != nil {
			p.log.Warn("rate limiter unavailable", zap.Error(err),
				zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
			return errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "rate limiter unavailable; try again shortly")
		}
		if !seen.Allowed {
			p.metrics.rateLimited.Inc()
			secs := ratelimit.Seconds(seen.RetryAfter())
			return errs.Newf(http.StatusTooManyRequests, errs.CodeRateLimited,
				"too many failed authentications from this address; retry in %d s", secs).
				WithHeader(ratelimit.HeaderRetryAfter, strconv.Itoa(secs))
		}
		w, err := p.app.Authenticate(r.Context(), r.Header.Values(echo.HeaderAuthorization), r.URL.RawQuery)
		if err != nil {
			herr := toHTTP(err)
			if e, ok := errs.As(herr); ok && e.Status == http.StatusUnauthorized {
				if _, cerr := p.limiter.Allow(r.Context(), bucket, p.authFailures); cerr != nil {
					// The failure goes uncounted; the 401 stands.
					p.log.Warn("failed authentication not counted", zap.Error(cerr))
				}
			}
			return herr
		}
		c.Set(ctxWorkspace, w)
		return next(c)
	}
}

// rateLimit counts the request against the workspace's per-minute limit and
// puts RateLimit-* on the response whatever comes next, errors included.
// When Redis cannot be reached the request is refused (503) rather than let
// through unlimited: the limit protects the services behind the gateway.
func (p *Public) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		w := workspaceOf(c)
		limit := w.RateLimit(p.app.DefaultRatePerMinute())
		res, err := p.limiter.Allow(c.Request().Context(), "api:"+w.ID, limit)
		if err != nil {
			p.log.Warn("rate limiter unavailable", zap.Error(err), zap.String("workspace_id", w.ID),
				zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
			return errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "rate limiter unavailable; try again shortly")
		}
		res.SetHeaders(c.Response().Header())
		if !res.Allowed {
			p.metrics.rateLimited.Inc()
			return errs.Newf(http.StatusTooManyRequests, errs.CodeRateLimited,
				"rate limit of %d requests per minute reached; retry in %d s", limit, ratelimit.Seconds(res.RetryAfter()))
		}
		return next(c)
	}
}

// serve answers /v1/me itself and forwards every other known route.
func (p *Public) serve(c echo.Context) error {
	r := c.Request()
	path := v1Path(r.URL.EscapedPath())
	rt, ok := resolve(path)
	if !ok {
		return errs.Newf(http.StatusNotFound, errs.CodeNotFound, "no such route: %s %s", r.Method, path)
	}
	if rt.service == "" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			c.Response().Header().Set("Allow", "GET, HEAD")
			return errs.New(http.StatusMethodNotAllowed, errs.CodeMethodNotAllowed, "method not allowed on /v1/me")
		}
		return p.me(c)
	}
	return p.fwd.forward(c, rt.service, path, workspaceOf(c))
}

// meDTO is GET /v1/me, exactly as spec §2/§4.
type meDTO struct {
	Workspace struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Slug string `json:"slug"`
	} `json:"workspace"`
	Plan struct {
		Name    string `json:"name"`
		AIUsed  int64  `json:"ai_used"`
		AILimit int64  `json:"ai_limit"`
	} `json:"plan"`
	Channels   []messagingapi.Channel `json:"channels"`
	RateLimit  rateLimitDTO           `json:"rate_limit"`
	APIVersion string                 `json:"api_version"`
}

type rateLimitDTO struct {
	PerMinute int `json:"per_minute"`
}

func (p *Public) me(c echo.Context) error {
	me, err := p.app.DescribeMe(c.Request().Context(), workspaceOf(c))
	if err != nil {
		return err
	}
	var out meDTO
	out.Workspace.ID, out.Workspace.Name, out.Workspace.Slug = me.Workspace.ID, me.Workspace.Name, me.Workspace.Slug
	out.Plan.Name, out.Plan.AIUsed, out.Plan.AILimit = me.Workspace.Plan.Name, me.Workspace.Plan.AIUsed, me.Workspace.Plan.AILimit
	out.Channels = make([]messagingapi.Channel, len(me.Channels))
	for i, ch := range me.Channels {
		out.Channels[i] = messagingapi.Channel{ID: ch.ID, Kind: ch.Kind, ExternalID: ch.ExternalID, AIMode: ch.AIMode, Status: ch.Status}
	}
	out.RateLimit.PerMinute = me.RatePerMinute
	out.APIVersion = "v1"
	return c.JSON(http.StatusOK, out)
}
