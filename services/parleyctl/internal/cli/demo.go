package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// Demo workspace identity; `demo` finds it by slug, so running it again
// changes nothing.
const (
	demoSlug        = "demo"
	demoName        = "Demo workspace"
	demoTelegramBot = "parley_demo_bot"
	demoWebchat     = "parley_demo_site"
)

var demoModules = []string{gatewayapi.ModuleDeveloperAPI, gatewayapi.ModuleFlows, gatewayapi.ModuleFlowAI, gatewayapi.ModuleFlowScript}

// demoAILimit is the demo plan's AI replies.
const demoAILimit = 1000

// demoFlowTemplate is the demo flow: a question, an http call, a condition
// and an end. $HEALTH_URL and $REVISION are filled in by demoFlow.
//
//go:embed demo_flow.json
var demoFlowTemplate []byte

// demoAIFlowTemplate is the demo AI flow: a knowledge search over the demo
// document, then an llm answer that is sent. $REVISION is filled in by
// demoAIFlow.
//
//go:embed demo_ai_flow.json
var demoAIFlowTemplate []byte

// demoDocument is the demo knowledge base's document, the demo shop's
// policy, added under demoDocumentTitle.
//
//go:embed demo_policy.md
var demoDocument []byte

const demoDocumentTitle = "Demo shop policy"

// demo seeds the demo workspace with its fixed API key, a Telegram
// channel, a webchat channel the assistant answers, the demo flows and the
// knowledge base's document, creating only what is missing, and prints how
// to reach them.
func demo(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("demo")
	if err := f.parse(args); err != nil {
		return err
	}
	cfg, err := c.settings()
	if err != nil {
		return err
	}
	ws, err := c.ensureDemoWorkspace(ctx)
	if err != nil {
		return err
	}
	key, err := c.api.CreateAPIKey(ctx, ws.ID, gatewayapi.NewAPIKey{Name: "demo", Key: cfg.DemoAPIKey})
	if err != nil {
		return fmt.Errorf("demo api key: %w", err)
	}
	existing, err := c.api.ListChannels(ctx, ws.ID)
	if err != nil {
		return fmt.Errorf("list demo channels: %w", err)
	}
	telegram, err := c.ensureDemoChannel(ctx, existing, messagingapi.NewChannel{
		WorkspaceID: ws.ID,
		Kind:        messagingapi.KindTelegram,
		ExternalID:  demoTelegramBot,
		Token:       cfg.DemoTelegramToken,
		Secret:      cfg.DemoTelegramSecret,
	})
	if err != nil {
		return err
	}
	webchat, err := c.ensureDemoChannel(ctx, existing, messagingapi.NewChannel{
		WorkspaceID: ws.ID,
		Kind:        messagingapi.KindWebchat,
		ExternalID:  demoWebchat,
	})
	if err != nil {
		return err
	}
	if webchat, err = c.ensureDemoAssistant(ctx, ws.ID, webchat); err != nil {
		return err
	}
	// The workspace's active API flows, as its developers' keys list them.
	listed, err := c.api.ListFlows(ctx, ws.ID)
	if err != nil {
		return fmt.Errorf("list demo flows: %w", err)
	}
	doc, name, description, err := demoFlow(cfg.FlowRunnerURL() + "/healthz")
	if err != nil {
		return err
	}
	flow, err := c.ensureDemoFlow(ctx, ws.ID, listed, doc, name, description)
	if err != nil {
		return err
	}
	document, err := c.ensureDemoDocument(ctx, ws.ID)
	if err != nil {
		return err
	}
	doc, name, description, err = demoAIFlow()
	if err != nil {
		return err
	}
	aiFlow, err := c.ensureDemoFlow(ctx, ws.ID, listed, doc, name, description)
	if err != nil {
		return err
	}
	return c.print(map[string]any{
		"workspace":   ws,
		"api_key":     cfg.DemoAPIKey,
		"api_key_id":  key.ID,
		"gateway_url": cfg.GatewayURL(),
		"channels":    []messagingapi.AdminChannel{telegram, webchat},
		"telegram_ingress": map[string]string{
			"url":          cfg.MessagingURL() + "/ingress/telegram/" + telegram.ID,
			"secret_token": telegram.Secret,
		},
		"webchat_url": cfg.MessagingURL() + "/webchat/" + webchat.ID,
		"flow_id":     flow.ID,
		"flow":        flow,
		"ai_flow_id":  aiFlow.ID,
		"ai_flow":     aiFlow,
		"kb_document": document,
	})
}

func (c *CLI) ensureDemoWorkspace(ctx context.Context) (gatewayapi.Workspace, error) {
	found, ok, err := c.api.FindWorkspaceBySlug(ctx, demoSlug)
	if err != nil {
		return gatewayapi.Workspace{}, fmt.Errorf("find demo workspace: %w", err)
	}
	if ok {
		return found, nil
	}
	aiLimit := int64(demoAILimit)
	created, err := c.api.CreateWorkspace(ctx, gatewayapi.NewWorkspace{Name: demoName, Slug: demoSlug, Modules: demoModules, AILimit: &aiLimit})
	if err != nil {
		return gatewayapi.Workspace{}, fmt.Errorf("create demo workspace: %w", err)
	}
	return created, nil
}

// ensureDemoChannel returns the channel of want's kind and external id
// among existing, creating it when missing.
func (c *CLI) ensureDemoChannel(ctx context.Context, existing []messagingapi.AdminChannel, want messagingapi.NewChannel) (messagingapi.AdminChannel, error) {
	for _, ch := range existing {
		if ch.Kind == want.Kind && ch.ExternalID == want.ExternalID {
			return ch, nil
		}
	}
	created, err := c.api.CreateChannel(ctx, want)
	if err != nil {
		return messagingapi.AdminChannel{}, fmt.Errorf("create demo %s channel: %w", want.Kind, err)
	}
	return created, nil
}

// ensureDemoAssistant makes the assistant answer the demo webchat's
// customers (docs/chat.md "Who answers a customer message"): the channel in
// mode auto (new channels are; an older demo's may have been switched),
// and no chat flow, cleared whatever is set, as clearing one that has
// none changes nothing. It returns the channel as it now is.
func (c *CLI) ensureDemoAssistant(ctx context.Context, workspaceID string, webchat messagingapi.AdminChannel) (messagingapi.AdminChannel, error) {
	if webchat.AIMode != messagingapi.AIModeAuto {
		changed, err := c.api.SetChannelAIMode(ctx, webchat.ID, messagingapi.AIModeAuto)
		if err != nil {
			return messagingapi.AdminChannel{}, fmt.Errorf("demo webchat channel to mode auto: %w", err)
		}
		webchat = changed
	}
	if _, err := c.api.ClearChatFlow(ctx, workspaceID, webchat.ID); err != nil {
		return messagingapi.AdminChannel{}, fmt.Errorf("clear the demo webchat channel's chat flow: %w", err)
	}
	return webchat, nil
}

// demoFlow is the demo flow's document for this configuration: its http
// node calls healthURL. Its description ends with a revision, a digest of
// the rest, by which a later demo tells whether the flow it finds is this
// document (a changed FLOW_RUNNER_ADDR or a new parleyctl) without reading
// it back.
func demoFlow(healthURL string) (doc []byte, name, description string, err error) {
	quoted, err := json.Marshal(healthURL)
	if err != nil {
		return nil, "", "", err
	}
	return revised(bytes.ReplaceAll(demoFlowTemplate, []byte(`"$HEALTH_URL"`), quoted))
}

// demoAIFlow is the demo AI flow's document, revised as demoFlow's is.
func demoAIFlow() (doc []byte, name, description string, err error) {
	return revised(demoAIFlowTemplate)
}

// revised fills a demo flow's $REVISION with a digest of the rest and
// returns it with its name and description.
func revised(doc []byte) (_ []byte, name, description string, err error) {
	sum := sha256.Sum256(doc)
	doc = bytes.ReplaceAll(doc, []byte("$REVISION"), []byte(hex.EncodeToString(sum[:4])))
	var head struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return nil, "", "", fmt.Errorf("demo flow: %w", err)
	}
	return doc, head.Name, head.Description, nil
}

// ensureDemoFlow makes sure the demo flow doc (named name, described by
// description) is published as this parleyctl and configuration describe
// it, given the workspace's flows as listed: created when missing, a new
// version when the one found differs, left alone otherwise. It returns
// the flow's id and published version, as a publish answers them.
func (c *CLI) ensureDemoFlow(ctx context.Context, workspaceID string, listed []flowrunnerapi.Flow, doc []byte, name, description string) (flowrunnerapi.PublishedFlow, error) {
	flowID := ""
	for _, f := range listed {
		if f.Name != name {
			continue
		}
		if f.Description == description {
			return flowrunnerapi.PublishedFlow{ID: f.ID, PublishedVersion: f.PublishedVersion}, nil
		}
		flowID = f.ID
		break
	}
	published, err := c.api.PublishFlow(ctx, workspaceID, flowID, doc)
	if err != nil {
		return flowrunnerapi.PublishedFlow{}, fmt.Errorf("publish demo flow %q: %w", name, err)
	}
	return published, nil
}

// ensureDemoDocument adds the demo shop's policy to the demo workspace's
// knowledge base unless a document of its title is there.
func (c *CLI) ensureDemoDocument(ctx context.Context, workspaceID string) (addedDocument, error) {
	docs, err := c.api.ListDocuments(ctx, workspaceID)
	if err != nil {
		return addedDocument{}, fmt.Errorf("list demo documents: %w", err)
	}
	for _, d := range docs {
		if d.Title == demoDocumentTitle {
			return added(d), nil
		}
	}
	d, err := c.api.AddDocument(ctx, workspaceID, demoDocumentTitle, string(demoDocument))
	if err != nil {
		return addedDocument{}, fmt.Errorf("add demo document: %w", err)
	}
	return added(d), nil
}
