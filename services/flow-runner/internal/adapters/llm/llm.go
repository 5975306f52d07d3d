// Package llm is the AI nodes' LLM provider: run.LLM over any
// OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama,
// LiteLLM), POST {LLM_BASE_URL}/chat/completions. A 429, a 5xx or no reply
// is retried with exponential backoff and jitter (or after the reply's
// Retry-After) while the caller's ctx, the run's remaining budget, leaves
// time for it; each attempt is bounded by LLM_TIMEOUT. A call's cost comes
// from the LLM_PRICES table by the model it asked for.
package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/openaicompat"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Defaults of the Options left zero.
const (
	DefaultAttemptTimeout = 30 * time.Second
	DefaultBackoff        = 500 * time.Millisecond
)

// maxAttempts bounds the calls of one Chat even when ctx has no deadline;
// the engine's ctx always has one, which usually ends the retries first.
const maxAttempts = 8

// Options configure a Client.
type Options struct {
	// BaseURL is LLM_BASE_URL ("https://api.openai.com/v1").
	BaseURL string
	// APIKey is LLM_API_KEY, sent as a bearer token; empty sends none.
	APIKey string
	// Model is LLM_MODEL, used when a request names no model.
	Model string
	// Prices is LLM_PRICES; a model not in it costs 0.
	Prices Prices
	// AttemptTimeout is LLM_TIMEOUT, the bound of one attempt; zero means
	// DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Backoff is the wait before the first retry, doubled for each next
	// one up to 16 times it, less up to half at random so that runs
	// refused together do not come back together; zero means
	// DefaultBackoff.
	Backoff time.Duration
	// HTTP makes the calls; nil means openaicompat.NewHTTPClient().
	HTTP *http.Client
	Log  *zap.Logger
}

// Client implements run.LLM. It is safe for concurrent use.
type Client struct {
	endpoint       openaicompat.Endpoint
	model          string
	prices         Prices
	attemptTimeout time.Duration
	backoff        time.Duration
	log            *zap.Logger
	// unpriced holds the models already warned about, so that a missing
	// price is logged once per model, not once per call.
	unpriced sync.Map
}

var _ run.LLM = (*Client)(nil)

// New returns a Client.
func New(o Options) *Client {
	c := &Client{
		endpoint:       openaicompat.Endpoint{BaseURL: o.BaseURL, APIKey: o.APIKey, HTTP: o.HTTP},
		model:          o.Model,
		prices:         o.Prices,
		attemptTimeout: o.AttemptTimeout,
		backoff:        o.Backoff,
		log:            o.Log,
	}
	if c.endpoint.HTTP == nil {
		c.endpoint.HTTP = openaicompat.NewHTTPClient()
	}
	if c.attemptTimeout <= 0 {
		c.attemptTimeout = DefaultAttemptTimeout
	}
	if c.backoff <= 0 {
		c.backoff = DefaultBackoff
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	return c
}

type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	Temperature    *float64        `json:"temperature,omitempty"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type responseFormat struct {
	Type string `json:"type"`
}

type chatCompletion struct {
	Choices []struct {
		Message struct {
			// Content is null when the model answered with something
			// other than text (a tool call, a refusal).
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// Chat implements run.LLM. Its errors say what the provider answered
// (the engine names the provider): "HTTP 503: overloaded (3 attempts; the
// run's time ran out)", "no reply: connection refused", "the reply has no
// choices".
func (c *Client) Chat(ctx context.Context, req run.ChatRequest) (run.ChatReply, error) {
	body := chatRequest{Model: req.Model, Temperature: req.Temperature, MaxTokens: req.MaxTokens}
	if body.Model == "" {
		body.Model = c.model
	}
	body.Messages = make([]chatMessage, len(req.Messages))
	for i, m := range req.Messages {
		body.Messages[i] = chatMessage(m)
	}
	if req.JSON {
		body.ResponseFormat = &responseFormat{Type: "json_object"}
	}

	var reply chatCompletion
	if err := c.post(ctx, body, &reply); err != nil {
		return run.ChatReply{}, err
	}
	if len(reply.Choices) == 0 {
		return run.ChatReply{}, errors.New("the reply has no choices")
	}
	content := reply.Choices[0].Message.Content
	if content == nil {
		return run.ChatReply{}, fmt.Errorf("the reply has no text (finish_reason %q)", reply.Choices[0].FinishReason)
	}
	return run.ChatReply{
		Text:    *content,
		Model:   body.Model,
		Tokens:  tokens(reply),
		CostUSD: c.cost(body.Model, reply),
	}, nil
}

// post makes the call, retrying what may succeed if made again while ctx
// leaves time for the wait. Its error is the last reply's reason, with how
// many attempts were made and why they stopped.
func (c *Client) post(ctx context.Context, body chatRequest, out *chatCompletion) error {
	var last error
	for attempt := 1; ; attempt++ {
		attemptCtx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
		err := c.endpoint.Post(attemptCtx, "/chat/completions", body, out)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			// The run's time ended mid-call: the reply before it says
			// more than "no answer in time".
			return giveUp(cmp.Or(last, err), attempt, ended(ctx))
		case !openaicompat.Retryable(err):
			return giveUp(err, attempt, "")
		case attempt == maxAttempts:
			return giveUp(err, attempt, "")
		}
		last = err
		wait := c.wait(attempt, err)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			return giveUp(err, attempt, "no time left to retry")
		}
		c.log.Warn("llm call retried", zap.Int("attempt", attempt), zap.Duration("wait", wait), zap.String("reason", err.Error()))
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return giveUp(err, attempt, ended(ctx))
		case <-timer.C:
		}
	}
}

// giveUp is post's error: err's reason, then how many attempts were made
// and why no more were.
func giveUp(err error, attempts int, why string) error {
	var notes []string
	if attempts > 1 {
		notes = append(notes, fmt.Sprintf("%d attempts", attempts))
	}
	if why != "" {
		notes = append(notes, why)
	}
	if len(notes) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(notes, "; "))
}

// ended says why ctx ended, for giveUp.
func ended(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.Canceled) {
		return "the run was canceled"
	}
	return "the run's time ran out"
}

// wait is how long to wait before attempt+1: what the provider's
// Retry-After asks, else the backoff with jitter.
func (c *Client) wait(attempt int, err error) time.Duration {
	var status *openaicompat.StatusError
	if errors.As(err, &status) && status.RetryAfter > 0 {
		return status.RetryAfter
	}
	d := c.backoff << min(attempt-1, 4)
	return d/2 + rand.N(d/2+1)
}

// tokens is usage.total_tokens, or its parts' sum when a server sends only
// those.
func tokens(r chatCompletion) int {
	if r.Usage.TotalTokens > 0 {
		return r.Usage.TotalTokens
	}
	return max(0, r.Usage.PromptTokens) + max(0, r.Usage.CompletionTokens)
}

// cost prices a reply's usage by model. A server that reports only
// total_tokens has them priced as input, the cheaper side for every listed
// model.
func (c *Client) cost(model string, r chatCompletion) float64 {
	price, ok := c.prices[model]
	if !ok {
		if _, warned := c.unpriced.LoadOrStore(model, true); !warned {
			c.log.Warn("llm model has no price in LLM_PRICES; its calls cost 0", zap.String("model", model))
		}
		return 0
	}
	if r.Usage.PromptTokens == 0 && r.Usage.CompletionTokens == 0 {
		return price.Cost(r.Usage.TotalTokens, 0)
	}
	return price.Cost(r.Usage.PromptTokens, r.Usage.CompletionTokens)
}
