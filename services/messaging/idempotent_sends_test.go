package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/metafake"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
	httpport "github.com/parleyhq/parley/services/messaging/internal/ports/http"
)

// The send routes' Idempotency-Key, as a developer meets it on each of the
// five: a repeat is the first answer again and the platform gets one send;
// another body is 422, a bad key 400; a send refused before it reached the
// customer leaves its key free; racing repeats send once; and PostgreSQL
// answers a key Redis lost.

// answer is one call's status, headers and raw body.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) replayed() bool { return a.header.Get(idempotency.ReplayedHeader) == "true" }

func (a answer) code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(a.body, &e)
	return e.Code
}

func (a answer) String() string {
	return fmt.Sprintf("%d replayed=%v %s", a.status, a.replayed(), a.body)
}

// keyed posts body to path as the gateway forwards it for ws, with the
// Idempotency-Key key (none when empty), within ctx.
func (h *harness) keyed(ctx context.Context, ws, path, key, body string) (answer, error) {
	req := &rpcv1.Request{WorkspaceId: ws, Method: http.MethodPost, Path: path, Body: []byte(body),
		Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}}}
	if key != "" {
		req.Headers = append(req.Headers, &rpcv1.Header{Name: idempotency.Header, Value: key})
	}
	resp, err := h.client.Do(ctx, rpc.ServiceMessaging, rpc.EndpointAPI, req)
	if err != nil {
		return answer{}, err
	}
	hd := http.Header{}
	for _, x := range resp.GetHeaders() {
		hd.Add(x.GetName(), x.GetValue())
	}
	return answer{status: int(resp.GetStatus()), header: hd, body: resp.GetBody()}, nil
}

// mustKeyed is keyed that fails the test on an rpc error.
func (h *harness) mustKeyed(ws, path, key, body string) answer {
	h.t.Helper()
	a, err := h.keyed(context.Background(), ws, path, key, body)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	return a
}

// sendTarget is a fresh conversation or comment a route sends to.
type sendTarget struct {
	path string
	// body is a valid request carrying text; invalid is refused by the
	// send's own rules (after the key is claimed).
	body    func(text string) string
	invalid string
	// unknownPath and unknownBody name a conversation or comment the
	// workspace does not have.
	unknownPath, unknownBody string
}

// sendRoute is one of the five send routes, on a harness with a fake
// Telegram (the message routes) and a fake Graph API (the comment routes).
type sendRoute struct {
	name string
	// perSend is how many platform calls one send makes.
	perSend int
	// oncePerTarget: the route sends once per comment (private replies).
	oncePerTarget bool
	fresh         func(h *harness, g *metaGraph, ws string) sendTarget
	// sends counts the platform calls of this route's kind so far.
	sends func(h *harness, g *metaGraph) int
	// failNext makes the platform refuse the next send with a 5xx before
	// taking it.
	failNext func(h *harness, g *metaGraph)
}

func jsonBody(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// customers gives each fresh conversation or comment its own customer.
var customers atomic.Int64

func telegramTarget(h *harness, ws, path string, body func(conv, text string) string, invalid func(conv string) string) sendTarget {
	ch := h.telegramChannel(ws, "external")
	conv := h.customerConversation(ws, ch, 700000+customers.Add(1))
	return sendTarget{
		path: path, body: func(text string) string { return body(conv.ID, text) }, invalid: invalid(conv.ID),
		unknownPath: path, unknownBody: body(uuid.NewString(), "hello"),
	}
}

func telegramSends(h *harness, _ *metaGraph) int {
	n := 0
	for _, c := range h.tg.Calls() {
		if c.Method == "sendMessage" || c.Method == "sendPhoto" {
			n++
		}
	}
	return n
}

func commentTarget(h *harness, g *metaGraph, ws, route string) sendTarget {
	n := customers.Add(1)
	page := fmt.Sprintf("9%d%s", n, strings.ReplaceAll(uuid.NewString()[:6], "-", ""))
	h.cmtChannel(ws, "messenger", page, "external")
	cid := page + "_8001"
	g.SetCommenter(cid, fmt.Sprintf("psid-%d", n))
	if code := h.cmtPost(feedComment(page, cid, fmt.Sprintf("2460%d", n), "Ada Lovelace", "Do you ship?", time.Now().Add(-time.Hour), "add")); code != http.StatusOK {
		h.t.Fatalf("comment ingress: %d", code)
	}
	body := func(text string) string { return jsonBody(map[string]any{"text": text}) }
	return sendTarget{
		path: "/v1/comments/" + cid + "/" + route, body: body, invalid: body(""),
		unknownPath: "/v1/comments/" + page + "_404/" + route, unknownBody: body("hello"),
	}
}

var sendRoutes = []sendRoute{
	{
		name: "messages", perSend: 1,
		fresh: func(h *harness, _ *metaGraph, ws string) sendTarget {
			return telegramTarget(h, ws, "/v1/messages",
				func(conv, text string) string { return jsonBody(map[string]any{"conversation_id": conv, "text": text}) },
				func(conv string) string { return jsonBody(map[string]any{"conversation_id": conv, "text": "   "}) })
		},
		sends:    telegramSends,
		failNext: func(h *harness, _ *metaGraph) { h.tg.FailNext("sendMessage", 500, "Internal Server Error") },
	},
	{
		name: "image", perSend: 2, // the image, then the text
		fresh: func(h *harness, _ *metaGraph, ws string) sendTarget {
			return telegramTarget(h, ws, "/v1/image",
				func(conv, text string) string {
					return jsonBody(map[string]any{"conversation_id": conv, "image_url": "https://cdn.example/jacket.png", "text": text})
				},
				func(conv string) string {
					return jsonBody(map[string]any{"conversation_id": conv, "image_url": "http://cdn.example/jacket.png"})
				})
		},
		sends:    telegramSends,
		failNext: func(h *harness, _ *metaGraph) { h.tg.FailNext("sendPhoto", 500, "Internal Server Error") },
	},
	{
		name: "carousel", perSend: 2, // Telegram sends each card as a message
		fresh: func(h *harness, _ *metaGraph, ws string) sendTarget {
			cards := func(title string) []map[string]any {
				return []map[string]any{
					{"title": title, "image_url": "https://cdn.example/1.png"},
					{"title": "Boots", "image_url": "https://cdn.example/2.png"},
				}
			}
			return telegramTarget(h, ws, "/v1/carousel",
				func(conv, text string) string {
					return jsonBody(map[string]any{"conversation_id": conv, "elements": cards(text)})
				},
				func(conv string) string {
					return jsonBody(map[string]any{"conversation_id": conv, "elements": cards(strings.Repeat("t", 81))})
				})
		},
		sends:    telegramSends,
		failNext: func(h *harness, _ *metaGraph) { h.tg.FailNext("sendPhoto", 500, "Internal Server Error") },
	},
	{
		name: "comment reply", perSend: 1,
		fresh: func(h *harness, g *metaGraph, ws string) sendTarget { return commentTarget(h, g, ws, "reply") },
		sends: func(_ *harness, g *metaGraph) int {
			n := 0
			for _, c := range g.Calls() {
				if c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/comments") {
					n++
				}
			}
			return n
		},
		failNext: func(_ *harness, g *metaGraph) {
			g.FailNext("/9", metafake.GraphError{Status: 500, Message: "An unexpected error has occurred.", Type: "OAuthException", Code: 2})
		},
	},
	{
		name: "private reply", perSend: 1, oncePerTarget: true,
		fresh: func(h *harness, g *metaGraph, ws string) sendTarget { return commentTarget(h, g, ws, "private-reply") },
		sends: func(_ *harness, g *metaGraph) int { return len(g.sends()) },
		failNext: func(_ *harness, g *metaGraph) {
			g.FailNext("/me/messages", metafake.GraphError{Status: 500, Message: "An unexpected error has occurred.", Type: "OAuthException", Code: 2})
		},
	},
}

// forEachRoute runs rule on every send route, each on its own harness.
func forEachRoute(t *testing.T, rule func(t *testing.T, h *harness, g *metaGraph, r sendRoute)) {
	for _, r := range sendRoutes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			g := newMetaGraph(t)
			h := newCommentHarness(t, g)
			rule(t, h, g, r)
		})
	}
}

// wantSends fails unless the route's platform calls are want.
func wantSends(t *testing.T, h *harness, g *metaGraph, r sendRoute, want int, when string) {
	t.Helper()
	if got := r.sends(h, g); got != want {
		t.Fatalf("%s: the platform received %d calls, want %d", when, got, want)
	}
}

func wantSuccess(t *testing.T, a answer, when string) {
	t.Helper()
	if (a.status != http.StatusCreated && a.status != http.StatusOK) || a.replayed() {
		t.Fatalf("%s = %v, want a first answer", when, a)
	}
}

func wantCode(t *testing.T, a answer, status int, code, when string) {
	t.Helper()
	if a.status != status || a.code() != code || a.replayed() {
		t.Fatalf("%s = %v, want %d %s", when, a, status, code)
	}
}

// wantReplay fails unless a is first again, byte for byte, marked replayed.
func wantReplay(t *testing.T, a, first answer, when string) {
	t.Helper()
	if a.status != first.status || !bytes.Equal(a.body, first.body) || !a.replayed() {
		t.Fatalf("%s = %v, want the first answer %v replayed", when, a, first)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q", when, ct)
	}
}

// A repeat is the first answer, replayed, and sends nothing; another body
// with the key is 422; the same key in another workspace is its own.
func TestIdempotentSendIsReplayed(t *testing.T) {
	t.Parallel()
	forEachRoute(t, func(t *testing.T, h *harness, g *metaGraph, r sendRoute) {
		ws := uuid.NewString()
		tg := r.fresh(h, g, ws)
		before := r.sends(h, g)
		first := h.mustKeyed(ws, tg.path, "order-1", tg.body("Your order shipped"))
		wantSuccess(t, first, "first send")
		wantSends(t, h, g, r, before+r.perSend, "after the first send")
		for i := range 3 {
			wantReplay(t, h.mustKeyed(ws, tg.path, "order-1", tg.body("Your order shipped")), first, fmt.Sprintf("repeat %d", i+1))
		}
		wantSends(t, h, g, r, before+r.perSend, "after the repeats")

		wantCode(t, h.mustKeyed(ws, tg.path, "order-1", tg.body("Something else")), http.StatusUnprocessableEntity, idempotency.CodeKeyReuse, "another body")
		// Byte-different JSON is another request too.
		wantCode(t, h.mustKeyed(ws, tg.path, "order-1", tg.body("Your order shipped")+" "), http.StatusUnprocessableEntity, idempotency.CodeKeyReuse, "another spacing")
		wantSends(t, h, g, r, before+r.perSend, "after the reuses")

		// Without a key nothing changes: each call sends (a private reply
		// goes once per comment, so it is sent to another).
		plainTarget := tg
		if r.oncePerTarget {
			plainTarget = r.fresh(h, g, ws)
		}
		plain := h.mustKeyed(ws, plainTarget.path, "", plainTarget.body("Your order shipped"))
		wantSuccess(t, plain, "a send without a key")
		if bytes.Equal(plain.body, first.body) {
			t.Fatalf("a send without a key answered the keyed one: %s", plain.body)
		}
		wantSends(t, h, g, r, before+2*r.perSend, "after a send without a key")

		// Keys are per workspace.
		other := uuid.NewString()
		otg := r.fresh(h, g, other)
		wantSuccess(t, h.mustKeyed(other, otg.path, "order-1", otg.body("Your order shipped")), "the same key in another workspace")
		wantSends(t, h, g, r, before+3*r.perSend, "after the other workspace's send")
	})
}

// A bad key is 400 before anything is sent.
func TestInvalidIdempotencyKeyOnSends(t *testing.T) {
	t.Parallel()
	forEachRoute(t, func(t *testing.T, h *harness, g *metaGraph, r sendRoute) {
		ws := uuid.NewString()
		tg := r.fresh(h, g, ws)
		before := r.sends(h, g)
		for name, key := range map[string]string{
			"129 characters": strings.Repeat("k", 129),
			"a tab":          "order\t1",
			"non-ASCII":      "заказ-1",
			"DEL":            "order\x7f",
		} {
			wantCode(t, h.mustKeyed(ws, tg.path, key, tg.body("hi")), http.StatusBadRequest, idempotency.CodeKeyInvalid, name)
		}
		// An empty header: given, so meant, but no key.
		req := &rpcv1.Request{WorkspaceId: ws, Method: http.MethodPost, Path: tg.path, Body: []byte(tg.body("hi")),
			Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}, {Name: idempotency.Header, Value: ""}}}
		resp, err := h.client.Do(context.Background(), rpc.ServiceMessaging, rpc.EndpointAPI, req)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, answer{status: int(resp.GetStatus()), header: http.Header{}, body: resp.GetBody()}, http.StatusBadRequest, idempotency.CodeKeyInvalid, "empty")
		wantSends(t, h, g, r, before, "after the bad keys")
		wantSuccess(t, h.mustKeyed(ws, tg.path, strings.Repeat("k", 128), tg.body("hi")), "128 characters")
	})
}

// A send refused before it reached the customer (its own rules, an
// unknown conversation or comment, a platform error) leaves its key free:
// the same key then sends once the problem is fixed, and only then answers
// repeats.
func TestRefusedSendLeavesTheKeyFree(t *testing.T) {
	t.Parallel()
	forEachRoute(t, func(t *testing.T, h *harness, g *metaGraph, r sendRoute) {
		ws := uuid.NewString()
		tg := r.fresh(h, g, ws)
		before := r.sends(h, g)
		const key = "retry-me"
		wantCode(t, h.mustKeyed(ws, tg.path, key, tg.invalid), http.StatusBadRequest, "invalid_request", "an invalid send")
		unknown := h.mustKeyed(ws, tg.unknownPath, key, tg.unknownBody)
		if unknown.status != http.StatusNotFound || unknown.replayed() {
			t.Fatalf("unknown target = %v", unknown)
		}
		wantSends(t, h, g, r, before, "after the refusals")

		r.failNext(h, g)
		wantCode(t, h.mustKeyed(ws, tg.path, key, tg.body("hello")), http.StatusBadGateway, "platform_error", "a platform failure")
		wantSends(t, h, g, r, before+1, "after the platform's refusal")

		first := h.mustKeyed(ws, tg.path, key, tg.body("hello"))
		wantSuccess(t, first, "the retry")
		wantSends(t, h, g, r, before+1+r.perSend, "after the retry")
		wantReplay(t, h.mustKeyed(ws, tg.path, key, tg.body("hello")), first, "a repeat of the retry")
		wantSends(t, h, g, r, before+1+r.perSend, "after the repeat")
	})
}

// Ten repeats at once send once: one first answer, the others the same
// answer replayed or idempotency_in_progress.
func TestConcurrentRepeatsSendOnce(t *testing.T) {
	t.Parallel()
	forEachRoute(t, func(t *testing.T, h *harness, g *metaGraph, r sendRoute) {
		ws := uuid.NewString()
		tg := r.fresh(h, g, ws)
		before := r.sends(h, g)
		body := tg.body("One of ten")
		answers := make([]answer, 10)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				a, err := h.keyed(context.Background(), ws, tg.path, "race", body)
				if err != nil {
					t.Errorf("call %d: %v", i, err)
				}
				answers[i] = a
			}()
		}
		close(start)
		wg.Wait()
		var firsts []answer
		for _, a := range answers {
			if (a.status == http.StatusCreated || a.status == http.StatusOK) && !a.replayed() {
				firsts = append(firsts, a)
			}
		}
		if len(firsts) != 1 {
			t.Fatalf("%d first answers among %v", len(firsts), answers)
		}
		for _, a := range answers {
			switch {
			case bytes.Equal(a.body, firsts[0].body) && a.status == firsts[0].status:
			case a.status == http.StatusConflict && a.code() == idempotency.CodeInProgress:
			default:
				t.Fatalf("answer %v is neither the first one nor in progress", a)
			}
		}
		wantSends(t, h, g, r, before+r.perSend, "after ten repeats at once")
		wantReplay(t, h.mustKeyed(ws, tg.path, "race", body), firsts[0], "a repeat afterwards")
	})
}

// The backstop: once Redis lost the keys (flushed, failed over), the
// receipt stored with the send still answers them, and the send does not
// go again; likewise when the process died between its commit and the
// Redis write, leaving the key's claim running.
func TestSendReceiptAnswersWhatRedisLost(t *testing.T) {
	t.Parallel()
	forEachRoute(t, func(t *testing.T, h *harness, g *metaGraph, r sendRoute) {
		ws := uuid.NewString()
		tg := r.fresh(h, g, ws)
		before := r.sends(h, g)
		body := tg.body("Kept in PostgreSQL")
		first := h.mustKeyed(ws, tg.path, "durable", body)
		wantSuccess(t, first, "first send")
		if n := h.count("idempotency_receipts", "workspace_id = ?", ws); n != 1 {
			t.Fatalf("%d receipts", n)
		}

		h.env.ForgetRedis(t)
		wantReplay(t, h.mustKeyed(ws, tg.path, "durable", body), first, "after a Redis flush")
		h.env.ForgetRedis(t)
		wantCode(t, h.mustKeyed(ws, tg.path, "durable", tg.body("Other")), http.StatusUnprocessableEntity, idempotency.CodeKeyReuse, "another body after a flush")

		// Died between the commit and the Redis write.
		h.env.ForgetRedis(t)
		keys := idempotency.New(h.env.Redis(t), redisx.Keys{Prefix: h.cfg.RedisPrefix}, httpport.SendKeyScope, idempotency.Options{})
		fp := idempotency.Fingerprint(http.MethodPost, tg.path, []byte(body))
		if res, err := keys.Begin(context.Background(), ws, "durable", fp); err != nil || res.State != idempotency.Claimed {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		wantReplay(t, h.mustKeyed(ws, tg.path, "durable", body), first, "with a claim left running")
		wantSends(t, h, g, r, before+r.perSend, "after the repeats")
	})
}

// gatedTelegram is a Bot API fake whose sendMessage calls wait at a gate
// until the test opens it: a platform slower than the client's patience.
type gatedTelegram struct {
	*telegramfake.Server
	arrived chan struct{}
	gate    chan struct{}
	open    sync.Once
}

func newGatedTelegram(t *testing.T) (*gatedTelegram, string) {
	g := &gatedTelegram{arrived: make(chan struct{}, 10), gate: make(chan struct{})}
	g.Server = &telegramfake.Server{OnCall: func(c telegramfake.Call) {
		if c.Method == "sendMessage" {
			g.arrived <- struct{}{}
			<-g.gate
		}
	}}
	srv := httptest.NewServer(g.Server)
	t.Cleanup(func() { g.letGo(); srv.Close() })
	return g, srv.URL
}

func (g *gatedTelegram) letGo() { g.open.Do(func() { close(g.gate) }) }

// A client that gave up on a slow platform and retries with its key gets
// the in-progress answer while the first send runs, then its result; the
// customer gets one message.
func TestRetryAfterTheClientGaveUp(t *testing.T) {
	t.Parallel()
	tg, url := newGatedTelegram(t)
	h := newHarness(t, func(c *svcconfig.Config) { c.TelegramAPIBase = url })
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")
	conv := h.customerConversation(ws, ch, 424242)
	body := jsonBody(map[string]any{"conversation_id": conv.ID, "text": "Your refund is on its way"})

	ctx, giveUp := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := h.keyed(ctx, ws, "/v1/messages", "refund-7", body)
		gaveUp <- err
	}()
	select {
	case <-tg.arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("the send never reached Telegram")
	}
	giveUp()
	if err := <-gaveUp; err == nil {
		t.Fatal("the client that gave up got an answer")
	}

	wantCode(t, h.mustKeyed(ws, "/v1/messages", "refund-7", body), http.StatusConflict, idempotency.CodeInProgress, "the retry while Telegram is slow")
	tg.letGo()
	var retry answer
	wait.For(t, 15*time.Second, "the retry to get the first send's answer", func() error {
		retry = h.mustKeyed(ws, "/v1/messages", "refund-7", body)
		if retry.status == http.StatusConflict && retry.code() == idempotency.CodeInProgress {
			return fmt.Errorf("still %v", retry)
		}
		return nil
	})
	if retry.status != http.StatusCreated || !retry.replayed() {
		t.Fatalf("retry = %v", retry)
	}
	var out messagingapi.MessageSent
	if err := json.Unmarshal(retry.body, &out); err != nil {
		t.Fatal(err)
	}
	msgs := h.messages(ws, conv.ID, "").Messages
	var mine []messagingapi.Message
	for _, m := range msgs {
		if m.Sender == "user" {
			mine = append(mine, m)
		}
	}
	if len(mine) != 1 || mine[0].ID != out.Message.ID || mine[0].Content != "Your refund is on its way" {
		t.Fatalf("stored sends = %+v, answer %+v", mine, out.Message)
	}
	n := 0
	for _, c := range tg.Calls() {
		if c.Method == "sendMessage" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("Telegram received %d sends, want 1", n)
	}
}

// A send that reached the customer and then failed keeps its answer for
// the key: an image whose text Telegram refused (the image is stored), and
// a Telegram carousel refused after its first card went out. A repeat is
// that answer again, and nothing is sent twice.
func TestSendThatReachedTheCustomerKeepsItsAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")
	conv := h.customerConversation(ws, ch, 515151)
	sends := func() int { return telegramSends(h, nil) }

	for _, tc := range []struct {
		name, path, body, failMethod string
	}{
		{
			name: "image whose text was refused", path: "/v1/image", failMethod: "sendMessage",
			body: jsonBody(map[string]any{"conversation_id": conv.ID, "image_url": "https://cdn.example/a.png", "text": "Our jacket"}),
		},
		{
			name: "carousel refused after its first card", path: "/v1/carousel", failMethod: "sendPhoto",
			body: jsonBody(map[string]any{"conversation_id": conv.ID, "elements": []map[string]any{
				{"title": "Gift card"}, // sendMessage: a card without an image
				{"title": "Jacket", "image_url": "https://cdn.example/j.png"},
			}}),
		},
	} {
		before := sends()
		h.tg.FailNext(tc.failMethod, 400, "Bad Request: wrong file identifier/HTTP URL specified")
		first := h.mustKeyed(ws, tc.path, tc.name, tc.body)
		wantCode(t, first, http.StatusBadGateway, "platform_error", tc.name)
		if sends() != before+2 {
			t.Fatalf("%s: %d platform calls, want 2", tc.name, sends()-before)
		}
		wantReplay(t, h.mustKeyed(ws, tc.path, tc.name, tc.body), first, tc.name+", repeated")
		h.env.ForgetRedis(t)
		wantReplay(t, h.mustKeyed(ws, tc.path, tc.name, tc.body), first, tc.name+", repeated after a Redis flush")
		if sends() != before+2 {
			t.Fatalf("%s: the repeats sent %d more", tc.name, sends()-before-2)
		}
	}
	// The image went out and is stored; the half-sent carousel is not.
	var types []string
	for _, m := range h.messages(ws, conv.ID, "").Messages {
		if m.Sender == "user" {
			types = append(types, m.Type)
		}
	}
	if len(types) != 1 || types[0] != "image" {
		t.Fatalf("stored sends = %v, want the image", types)
	}
}

// A send refused because the 24-hour window closed leaves its key free:
// once the customer writes again, the same key sends.
func TestClosedWindowLeavesTheKeyFree(t *testing.T) {
	t.Parallel()
	graph := newMetaGraph(t)
	h := newHarness(t, withMeta(graph), withWindow(time.Hour))
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "external")
	h.sendMeta(notification("page", testPageID, textEvent(testPageID, testPSID, "m_old", "hello", time.Now().Add(-2*time.Hour))))
	convs := h.conversations(ws, "").Conversations
	if len(convs) != 1 {
		t.Fatalf("conversations = %+v", convs)
	}
	body := jsonBody(map[string]any{"conversation_id": convs[0].ID, "text": "Still there?"})
	wantCode(t, h.mustKeyed(ws, "/v1/messages", "window-1", body), http.StatusConflict, "outside_messaging_window", "a send outside the window")
	if n := len(graph.sends()); n != 0 {
		t.Fatalf("meta got %d sends", n)
	}

	h.sendMeta(notification("page", testPageID, textEvent(testPageID, testPSID, "m_new", "yes!", time.Now())))
	first := h.mustKeyed(ws, "/v1/messages", "window-1", body)
	wantSuccess(t, first, "the same key once the customer wrote again")
	wantReplay(t, h.mustKeyed(ws, "/v1/messages", "window-1", body), first, "a repeat")
	if n := len(graph.sends()); n != 1 {
		t.Fatalf("meta got %d sends, want 1", n)
	}
}

// A private reply refused by its rules (the comment already has one)
// leaves its key free for another comment.
func TestPrivateReplyRuleLeavesTheKeyFree(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	answered := commentTarget(h, g, ws, "private-reply")
	wantSuccess(t, h.mustKeyed(ws, answered.path, "", answered.body("Hi!")), "the comment's private reply")
	wantCode(t, h.mustKeyed(ws, answered.path, "dm-2", answered.body("Hi again")), http.StatusConflict, "private_reply_used", "a second one")
	next := commentTarget(h, g, ws, "private-reply")
	wantSuccess(t, h.mustKeyed(ws, next.path, "dm-2", next.body("Hi again")), "the key on another comment")
	if n := len(g.sends()); n != 2 {
		t.Fatalf("meta got %d private replies, want 2", n)
	}
}
