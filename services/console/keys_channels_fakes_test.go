package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
)

// fakeKeys is the fake gateway's API keys, in the gateway's JSON, with
// the calls that reached them.
type fakeKeys struct {
	byWorkspace map[string][]gatewayapi.APIKey
	// created are the names of the keys created, revoked the ids revoked.
	created []string
	revoked []string
	// refusal, when set, answers every API key call.
	refusal *errs.Error
	// failAfter, when set, answers a create that made its key.
	failAfter *errs.Error
	// late, when set, holds a create that made its key until it is
	// closed: its answer comes after the console stopped waiting.
	late chan struct{}
}

// serveAPIKeys adds the gateway's admin API key routes to e; g.mu guards
// the keys.
func (g *fakeGateway) serveAPIKeys(e *echo.Echo) {
	e.POST("/admin/workspaces/:id/api-keys", func(c echo.Context) error {
		var in gatewayapi.NewAPIKey
		if err := httpx.BindJSON(c, &in); err != nil {
			return err
		}
		created, err := g.createAPIKey(c.Param("id"), in.Name)
		if err != nil {
			return err
		}
		g.mu.Lock()
		failAfter, late := g.keys.failAfter, g.keys.late
		g.mu.Unlock()
		if late != nil {
			<-late
		}
		if failAfter != nil {
			return failAfter
		}
		return c.JSON(http.StatusCreated, created)
	})
	e.GET("/admin/workspaces/:id/api-keys", func(c echo.Context) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if err := g.keysRefusal(c.Param("id")); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"api_keys": append([]gatewayapi.APIKey{}, g.keys.byWorkspace[c.Param("id")]...)})
	})
	e.DELETE("/admin/api-keys/:id", func(c echo.Context) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.keys.refusal != nil {
			return g.keys.refusal
		}
		for _, keys := range g.keys.byWorkspace {
			for i := range keys {
				if keys[i].ID != c.Param("id") {
					continue
				}
				g.keys.revoked = append(g.keys.revoked, keys[i].ID)
				if keys[i].RevokedAt == nil {
					at := time.Now().UTC().Format(time.RFC3339)
					keys[i].RevokedAt = &at
				}
				return c.JSON(http.StatusOK, gatewayapi.RevokedAPIKey{ID: keys[i].ID, RevokedAt: *keys[i].RevokedAt})
			}
		}
		return errs.NotFound("api_key_not_found", "API key not found")
	})
}

// answerCreates makes each create that made its key answer once late is
// closed (nil: at once), with failAfter when it is set.
func (g *fakeGateway) answerCreates(late chan struct{}, failAfter *errs.Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys.late, g.keys.failAfter = late, failAfter
}

// createAPIKey is the gateway's create of a key named name in workspace
// id, counted in created.
func (g *fakeGateway) createAPIKey(id, name string) (gatewayapi.CreatedAPIKey, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.keysRefusal(id); err != nil {
		return gatewayapi.CreatedAPIKey{}, err
	}
	g.keys.created = append(g.keys.created, name)
	if len(name) > 100 {
		return gatewayapi.CreatedAPIKey{}, errs.InvalidRequest("name must be at most 100 characters")
	}
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	plain := "pk_live_" + hex.EncodeToString(raw)
	k := gatewayapi.APIKey{ID: uuid.NewString(), Name: name, Prefix: plain[:12], CreatedAt: time.Now().UTC().Format(time.RFC3339)}
	g.keys.byWorkspace[id] = append(g.keys.byWorkspace[id], k)
	return gatewayapi.CreatedAPIKey{ID: k.ID, Key: plain}, nil
}

// keysRefusal is the gateway's answer before it touches workspace id's
// keys: the refusal set, or 404 for a workspace it does not have.
func (g *fakeGateway) keysRefusal(id string) error {
	if g.keys.refusal != nil {
		return g.keys.refusal
	}
	if _, ok := g.workspaces[id]; !ok {
		return errs.NotFound("workspace_not_found", "workspace not found")
	}
	if g.keys.byWorkspace == nil {
		g.keys.byWorkspace = map[string][]gatewayapi.APIKey{}
	}
	return nil
}

// apiKey adds a key to workspace id at the fake gateway and returns it.
func (h *harness) apiKey(id string, k gatewayapi.APIKey) gatewayapi.APIKey {
	h.gateway.mu.Lock()
	defer h.gateway.mu.Unlock()
	if h.gateway.keys.byWorkspace == nil {
		h.gateway.keys.byWorkspace = map[string][]gatewayapi.APIKey{}
	}
	k.ID = uuid.NewString()
	h.gateway.keys.byWorkspace[id] = append(h.gateway.keys.byWorkspace[id], k)
	return k
}

// fakeMessaging answers messaging's admin channel routes the console
// calls, in messaging's JSON, from a table, and records what reached it.
type fakeMessaging struct {
	mu       sync.Mutex
	channels []messagingapi.AdminChannel
	// created are the bodies of the creates, modes the ai_mode changes
	// ("channel id=mode").
	created []messagingapi.NewChannel
	modes   []string
	// refusal, when set, answers every call; createRefusal only creates.
	refusal       *errs.Error
	createRefusal *errs.Error
	// inbox is the conversations (inbox_fake_test.go).
	inbox fakeInbox
}

func serveMessaging(t *testing.T, env *testenv.Env) *fakeMessaging {
	t.Helper()
	m := &fakeMessaging{}
	e := httpx.NewEcho(env.Logger(t))
	e.POST("/admin/channels", func(c echo.Context) error {
		var in messagingapi.NewChannel
		if err := httpx.BindJSON(c, &in); err != nil {
			return err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.created = append(m.created, in)
		if m.refusal != nil {
			return m.refusal
		}
		if m.createRefusal != nil {
			return m.createRefusal
		}
		ch := messagingapi.AdminChannel{
			Channel:     messagingapi.Channel{ID: uuid.NewString(), Kind: in.Kind, ExternalID: in.ExternalID, AIMode: messagingapi.AIModeAuto, Status: "active"},
			WorkspaceID: in.WorkspaceID, Secret: in.Secret, CreatedAt: time.Now().UTC().Format(time.RFC3339),
		}
		if ch.Secret == "" {
			ch.Secret = "generated_secret_0123456789"
		}
		m.channels = append(m.channels, ch)
		return c.JSON(http.StatusCreated, messagingapi.AdminChannelAnswer{Channel: ch})
	})
	e.GET("/admin/channels", func(c echo.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.refusal != nil {
			return m.refusal
		}
		out := messagingapi.AdminChannelList{Channels: []messagingapi.AdminChannel{}}
		for _, ch := range m.channels {
			if ch.WorkspaceID == c.QueryParam("workspace_id") {
				out.Channels = append(out.Channels, ch)
			}
		}
		return c.JSON(http.StatusOK, out)
	})
	e.PATCH("/admin/channels/:id", func(c echo.Context) error {
		var in messagingapi.SetChannelAIMode
		if err := httpx.BindJSON(c, &in); err != nil {
			return err
		}
		mode := ""
		if in.AIMode != nil {
			mode = *in.AIMode
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.modes = append(m.modes, c.Param("id")+"="+mode)
		if m.refusal != nil {
			return m.refusal
		}
		if mode != messagingapi.AIModeAuto && mode != messagingapi.AIModeSuggest && mode != messagingapi.AIModeExternal {
			return errs.InvalidRequest("ai_mode must be one of auto, suggest, external")
		}
		for i := range m.channels {
			if m.channels[i].ID == c.Param("id") {
				m.channels[i].AIMode = mode
				return c.JSON(http.StatusOK, messagingapi.AdminChannelAnswer{Channel: m.channels[i]})
			}
		}
		return errs.NotFound("channel_not_found", "channel not found")
	})
	m.serveInbox(e)
	serveFake(t, env, rpc.ServiceMessaging, map[string]http.Handler{rpc.EndpointAdmin: e})
	return m
}

// channel adds a channel of workspace id to the fake messaging and
// returns it.
func (m *fakeMessaging) channel(id, kind, externalID, mode string) messagingapi.AdminChannel {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := messagingapi.AdminChannel{
		Channel:     messagingapi.Channel{ID: uuid.NewString(), Kind: kind, ExternalID: externalID, AIMode: mode, Status: "active"},
		WorkspaceID: id, Secret: "secret_of_" + externalID, CreatedAt: "2026-11-24T04:00:00Z",
	}
	m.channels = append(m.channels, ch)
	return ch
}
