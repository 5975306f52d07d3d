package cli

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

func workspaceCreate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("workspace create")
	name := f.String("name", "", "workspace name")
	slug := f.String("slug", "", "URL-safe short name")
	modules := f.String("modules", "developer_api", "comma-separated plan modules")
	aiLimit := f.Int64("ai-limit", 0, "AI replies allowed by the plan")
	rate := f.Int("rate-per-minute", 0, "API requests per minute")
	if err := f.parse(args, "name"); err != nil {
		return err
	}
	nw := gatewayapi.NewWorkspace{Name: *name, Slug: *slug, Modules: splitList(*modules)}
	if f.set("ai-limit") {
		nw.AILimit = aiLimit
	}
	if f.set("rate-per-minute") {
		nw.RatePerMinute = rate
	}
	w, err := c.api.CreateWorkspace(ctx, nw)
	if err != nil {
		return err
	}
	return c.printAnswer(map[string]any{"workspace": w})
}

func workspaceUpdate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("workspace update")
	id := f.String("workspace", "", "workspace id")
	modules := f.String("modules", "", "comma-separated plan modules")
	aiLimit := f.Int64("ai-limit", 0, "AI replies allowed by the plan")
	rate := f.Int("rate-per-minute", 0, "API requests per minute")
	if err := f.parse(args, "workspace"); err != nil {
		return err
	}
	var ch gatewayapi.WorkspaceChanges
	if f.set("modules") {
		ch.Modules = splitList(*modules)
	}
	if f.set("ai-limit") {
		ch.AILimit = aiLimit
	}
	if f.set("rate-per-minute") {
		ch.RatePerMinute = rate
	}
	if ch.Modules == nil && ch.AILimit == nil && ch.RatePerMinute == nil {
		return usagef("workspace update: nothing to change; give --modules, --ai-limit or --rate-per-minute")
	}
	w, err := c.api.UpdateWorkspace(ctx, *id, ch)
	if err != nil {
		return err
	}
	return c.printAnswer(map[string]any{"workspace": w})
}

func workspaceFeature(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("workspace feature")
	id := f.String("workspace", "", "workspace id")
	feature := f.String("feature", "", "feature flag, e.g. flows_api (on unless switched off)")
	on := f.Bool("on", false, "turn the feature on")
	off := f.Bool("off", false, "turn the feature off")
	if err := f.parse(args, "workspace", "feature"); err != nil {
		return err
	}
	if *on == *off {
		return usagef("workspace feature: give exactly one of --on and --off")
	}
	w, err := c.api.SetFeature(ctx, *id, *feature, *on)
	if err != nil {
		return err
	}
	return c.printAnswer(map[string]any{"workspace": w})
}

func apikeyCreate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("apikey create")
	id := f.String("workspace", "", "workspace id")
	name := f.String("name", "", "a label for the key")
	if err := f.parse(args, "workspace"); err != nil {
		return err
	}
	k, err := c.api.CreateAPIKey(ctx, *id, gatewayapi.NewAPIKey{Name: *name})
	if err != nil {
		return err
	}
	return c.printAnswer(k)
}

func apikeyRevoke(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("apikey revoke")
	id := f.String("id", "", "API key id")
	if err := f.parse(args, "id"); err != nil {
		return err
	}
	k, err := c.api.RevokeAPIKey(ctx, *id)
	if err != nil {
		return err
	}
	return c.printAnswer(k)
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
	if _, err := c.api.GetWorkspace(ctx, *wsID); err != nil {
		return err
	}
	ch, err := c.api.CreateChannel(ctx, messagingapi.NewChannel{WorkspaceID: *wsID, Kind: *kind, ExternalID: *externalID, Token: *token, Secret: *secret})
	if err != nil {
		return err
	}
	return c.printAnswer(map[string]any{"channel": ch})
}

func channelSetMode(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("channel set-mode")
	id := f.String("channel", "", "channel id")
	mode := f.String("mode", "", "auto, suggest or external")
	if err := f.parse(args, "channel", "mode"); err != nil {
		return err
	}
	ch, err := c.api.SetChannelAIMode(ctx, *id, *mode)
	if err != nil {
		return err
	}
	return c.printAnswer(map[string]any{"channel": ch})
}

// channelSetFlow assigns the channel's chat flow, or clears it
// (docs/chat.md "A channel's chat flow"). The flow-runner keeps it by
// workspace and does not know channels: messaging, which owns the
// channel, says whose it is, so an unknown channel fails here.
func channelSetFlow(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("channel set-flow")
	id := f.String("channel", "", "channel id")
	flowID := f.String("flow", "", "the chat flow: a published, active flow of the channel's workspace with the chat trigger")
	clearFlow := f.Bool("clear", false, "remove the channel's chat flow: the assistant answers")
	if err := f.parse(args, "channel"); err != nil {
		return err
	}
	if f.set("flow") == *clearFlow {
		return usagef("channel set-flow: give exactly one of --flow and --clear")
	}
	if f.set("flow") && *flowID == "" {
		return usagef("channel set-flow: --flow needs a flow id (--clear removes the chat flow)")
	}
	ch, err := c.api.Channel(ctx, *id)
	if e, ok := adminclient.AsError(err); ok && e.Code == "channel_not_found" {
		return fmt.Errorf("no channel %q (parleyctl channel create makes one): %w", *id, err)
	}
	if err != nil {
		return err
	}
	var chatFlow flowrunnerapi.ChatFlow
	if *clearFlow {
		chatFlow, err = c.api.ClearChatFlow(ctx, ch.WorkspaceID, ch.ID)
	} else {
		chatFlow, err = c.api.SetChatFlow(ctx, ch.WorkspaceID, ch.ID, *flowID)
	}
	if err != nil {
		return err
	}
	return c.printAnswer(flowrunnerapi.ChatFlowAnswer{ChatFlow: chatFlow})
}

func webhookResave(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("webhook resave")
	wsID := f.String("workspace", "", "workspace id")
	if err := f.parse(args, "workspace"); err != nil {
		return err
	}
	saved, err := c.api.ResaveWebhook(ctx, *wsID)
	if err != nil {
		return err
	}
	return c.printAnswer(saved)
}
