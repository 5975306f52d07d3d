package cli

import (
	"context"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley/pkg/rpc"
)

// workspace is the gateway's admin view of a workspace (only what the CLI
// itself reads; everything else is printed as received).
type workspace struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
}

func workspaceCreate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("workspace create")
	name := f.String("name", "", "workspace name")
	slug := f.String("slug", "", "URL-safe short name")
	modules := f.String("modules", "developer_api", "comma-separated plan modules")
	aiLimit := f.Int("ai-limit", 0, "AI replies allowed by the plan")
	rate := f.Int("rate-per-minute", 0, "API requests per minute")
	if err := f.parse(args, "name"); err != nil {
		return err
	}
	body := map[string]any{"name": *name, "modules": splitList(*modules)}
	if *slug != "" {
		body["slug"] = *slug
	}
	if f.set("ai-limit") {
		body["ai_limit"] = *aiLimit
	}
	if f.set("rate-per-minute") {
		body["rate_per_minute"] = *rate
	}
	return c.admin(ctx, rpc.ServiceGateway, http.MethodPost, "/admin/workspaces", body)
}

func workspaceUpdate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("workspace update")
	id := f.String("workspace", "", "workspace id")
	modules := f.String("modules", "", "comma-separated plan modules")
	aiLimit := f.Int("ai-limit", 0, "AI replies allowed by the plan")
	rate := f.Int("rate-per-minute", 0, "API requests per minute")
	if err := f.parse(args, "workspace"); err != nil {
		return err
	}
	body := map[string]any{}
	if f.set("modules") {
		body["modules"] = splitList(*modules)
	}
	if f.set("ai-limit") {
		body["ai_limit"] = *aiLimit
	}
	if f.set("rate-per-minute") {
		body["rate_per_minute"] = *rate
	}
	if len(body) == 0 {
		return usagef("workspace update: nothing to change; give --modules, --ai-limit or --rate-per-minute")
	}
	return c.admin(ctx, rpc.ServiceGateway, http.MethodPatch, "/admin/workspaces/"+url.PathEscape(*id), body)
}

func workspaceFeature(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("workspace feature")
	id := f.String("workspace", "", "workspace id")
	feature := f.String("feature", "", "feature flag, e.g. flows_api")
	on := f.Bool("on", false, "turn the feature on")
	off := f.Bool("off", false, "turn the feature off")
	if err := f.parse(args, "workspace", "feature"); err != nil {
		return err
	}
	if *on == *off {
		return usagef("workspace feature: give exactly one of --on and --off")
	}
	path := "/admin/workspaces/" + url.PathEscape(*id) + "/features/" + url.PathEscape(*feature)
	return c.admin(ctx, rpc.ServiceGateway, http.MethodPut, path, map[string]bool{"on": *on})
}

func apikeyCreate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("apikey create")
	id := f.String("workspace", "", "workspace id")
	name := f.String("name", "", "a label for the key")
	if err := f.parse(args, "workspace"); err != nil {
		return err
	}
	path := "/admin/workspaces/" + url.PathEscape(*id) + "/api-keys"
	return c.admin(ctx, rpc.ServiceGateway, http.MethodPost, path, map[string]string{"name": *name})
}

func apikeyRevoke(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("apikey revoke")
	id := f.String("id", "", "API key id")
	if err := f.parse(args, "id"); err != nil {
		return err
	}
	return c.admin(ctx, rpc.ServiceGateway, http.MethodDelete, "/admin/api-keys/"+url.PathEscape(*id), nil)
}

func channelCreate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("channel create")
	wsID := f.String("workspace", "", "workspace id")
	kind := f.String("kind", "", "telegram, messenger, instagram or webchat")
	externalID := f.String("external-id", "", "the channel's id on the platform")
	token := f.String("token", "", "the platform access token (Telegram bot token)")
	secret := f.String("secret", "", "the ingress secret, 16 to 256 characters of A-Z, a-z, 0-9, _ and - (generated when absent)")
	if err := f.parse(args, "workspace", "kind"); err != nil {
		return err
	}
	// The channel belongs to a workspace the gateway owns: check it exists
	// so a typo fails here instead of creating an orphan channel.
	if err := c.call.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodGet, "/admin/workspaces/"+url.PathEscape(*wsID), nil, nil); err != nil {
		return err
	}
	body := map[string]string{"workspace_id": *wsID, "kind": *kind, "external_id": *externalID, "token": *token, "secret": *secret}
	return c.admin(ctx, rpc.ServiceMessaging, http.MethodPost, "/admin/channels", body)
}

func channelSetMode(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("channel set-mode")
	id := f.String("channel", "", "channel id")
	mode := f.String("mode", "", "auto, suggest or external")
	if err := f.parse(args, "channel", "mode"); err != nil {
		return err
	}
	return c.admin(ctx, rpc.ServiceMessaging, http.MethodPatch, "/admin/channels/"+url.PathEscape(*id), map[string]string{"ai_mode": *mode})
}

func webhookResave(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("webhook resave")
	wsID := f.String("workspace", "", "workspace id")
	if err := f.parse(args, "workspace"); err != nil {
		return err
	}
	return c.admin(ctx, rpc.ServiceDispatcher, http.MethodPost, "/admin/webhooks/"+url.PathEscape(*wsID)+"/resave", nil)
}

// admin calls a service's admin endpoint and prints its answer as it came.
func (c *CLI) admin(ctx context.Context, service, method, path string, body any) error {
	var out map[string]any
	if err := c.call.CallJSON(ctx, service, rpc.EndpointAdmin, "", method, path, body, &out); err != nil {
		return err
	}
	return c.print(out)
}
