package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley/pkg/rpc"
)

// Demo workspace identity; `demo` finds it by slug, so running it again
// changes nothing.
const (
	demoSlug        = "demo"
	demoName        = "Demo workspace"
	demoTelegramBot = "parley_demo_bot"
	demoWebchat     = "parley_demo_site"
)

var demoModules = []string{"developer_api", "flows", "flow_ai", "flow_script"}

type channel struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	ExternalID string `json:"external_id"`
	AIMode     string `json:"ai_mode"`
	Status     string `json:"status"`
	Secret     string `json:"secret"`
}

// demo seeds the demo workspace, its fixed API key, a Telegram channel and
// a webchat channel, creating only what is missing, and prints how to reach
// them.
func demo(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("demo")
	if err := f.parse(args); err != nil {
		return err
	}
	ws, err := c.ensureDemoWorkspace(ctx)
	if err != nil {
		return err
	}
	var key struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	path := "/admin/workspaces/" + url.PathEscape(ws.ID) + "/api-keys"
	body := map[string]string{"name": "demo", "key": c.cfg.DemoAPIKey}
	if err := c.call.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodPost, path, body, &key); err != nil {
		return fmt.Errorf("demo api key: %w", err)
	}
	existing, err := c.demoChannels(ctx, ws.ID)
	if err != nil {
		return err
	}
	telegram, err := c.ensureDemoChannel(ctx, existing, map[string]string{
		"workspace_id": ws.ID,
		"kind":         "telegram",
		"external_id":  demoTelegramBot,
		"token":        c.cfg.DemoTelegramToken,
		"secret":       c.cfg.DemoTelegramSecret,
	})
	if err != nil {
		return err
	}
	webchat, err := c.ensureDemoChannel(ctx, existing, map[string]string{
		"workspace_id": ws.ID,
		"kind":         "webchat",
		"external_id":  demoWebchat,
	})
	if err != nil {
		return err
	}
	return c.print(map[string]any{
		"workspace":   ws,
		"api_key":     c.cfg.DemoAPIKey,
		"api_key_id":  key.ID,
		"gateway_url": c.cfg.GatewayURL(),
		"channels":    []channel{telegram, webchat},
		"telegram_ingress": map[string]string{
			"url":          c.cfg.MessagingURL() + "/ingress/telegram/" + telegram.ID,
			"secret_token": telegram.Secret,
		},
		"webchat_url": c.cfg.MessagingURL() + "/webchat/" + webchat.ID,
	})
}

func (c *CLI) ensureDemoWorkspace(ctx context.Context) (workspace, error) {
	var found struct {
		Workspaces []workspace `json:"workspaces"`
	}
	if err := c.call.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodGet, "/admin/workspaces?slug="+demoSlug, nil, &found); err != nil {
		return workspace{}, fmt.Errorf("find demo workspace: %w", err)
	}
	if len(found.Workspaces) > 0 {
		return found.Workspaces[0], nil
	}
	var created struct {
		Workspace workspace `json:"workspace"`
	}
	body := map[string]any{"name": demoName, "slug": demoSlug, "modules": demoModules, "ai_limit": 1000}
	if err := c.call.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodPost, "/admin/workspaces", body, &created); err != nil {
		return workspace{}, fmt.Errorf("create demo workspace: %w", err)
	}
	return created.Workspace, nil
}

func (c *CLI) demoChannels(ctx context.Context, workspaceID string) ([]channel, error) {
	var list struct {
		Channels []channel `json:"channels"`
	}
	if err := c.call.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAdmin, "", http.MethodGet, "/admin/channels?workspace_id="+url.QueryEscape(workspaceID), nil, &list); err != nil {
		return nil, fmt.Errorf("list demo channels: %w", err)
	}
	return list.Channels, nil
}

// ensureDemoChannel returns the channel of the body's kind and external_id
// among existing, creating it when missing.
func (c *CLI) ensureDemoChannel(ctx context.Context, existing []channel, body map[string]string) (channel, error) {
	for _, ch := range existing {
		if ch.Kind == body["kind"] && ch.ExternalID == body["external_id"] {
			return ch, nil
		}
	}
	var created struct {
		Channel channel `json:"channel"`
	}
	if err := c.call.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAdmin, "", http.MethodPost, "/admin/channels", body, &created); err != nil {
		return channel{}, fmt.Errorf("create demo %s channel: %w", body["kind"], err)
	}
	return created.Channel, nil
}
