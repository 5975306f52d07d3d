package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
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

// featureFlowsAPI opens the headless flow routes for a workspace (the
// gateway's account.Features).
const featureFlowsAPI = "flows_api"

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

type channel struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	ExternalID string `json:"external_id"`
	AIMode     string `json:"ai_mode"`
	Status     string `json:"status"`
	Secret     string `json:"secret"`
}

// demo seeds the demo workspace with the flows_api feature on, its fixed
// API key, a Telegram channel, a webchat channel and the demo flow,
// creating only what is missing, and prints how to reach them.
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
	if err := c.ensureDemoFeature(ctx, ws.ID); err != nil {
		return err
	}
	listed, err := c.demoFlows(ctx, ws.ID)
	if err != nil {
		return err
	}
	doc, name, description, err := demoFlow(c.cfg.FlowRunnerURL() + "/healthz")
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
		"api_key":     c.cfg.DemoAPIKey,
		"api_key_id":  key.ID,
		"gateway_url": c.cfg.GatewayURL(),
		"channels":    []channel{telegram, webchat},
		"telegram_ingress": map[string]string{
			"url":          c.cfg.MessagingURL() + "/ingress/telegram/" + telegram.ID,
			"secret_token": telegram.Secret,
		},
		"webchat_url": c.cfg.MessagingURL() + "/webchat/" + webchat.ID,
		"flow_id":     flow.ID,
		"flow":        flow,
		"ai_flow_id":  aiFlow.ID,
		"ai_flow":     aiFlow,
		"kb_document": document,
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

// demoFlowSummary is what demo prints of the demo flow.
type demoFlowSummary struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	PublishedVersion int    `json:"published_version"`
}

// ensureDemoFeature switches flows_api on for the demo workspace.
func (c *CLI) ensureDemoFeature(ctx context.Context, workspaceID string) error {
	path := "/admin/workspaces/" + url.PathEscape(workspaceID) + "/features/" + featureFlowsAPI
	if err := c.call.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodPut, path, map[string]bool{"on": true}, nil); err != nil {
		return fmt.Errorf("demo flows_api feature: %w", err)
	}
	return nil
}

// listedFlow is a flow as the flow-runner's GET /v1/flows lists it.
type listedFlow struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Description      string `json:"description"`
	PublishedVersion int    `json:"published_version"`
}

// demoFlows lists the demo workspace's flows. The flow-runner's admin
// routes do not list flows; its api route lists the workspace's active api
// flows, as the gateway would forward the demo key's GET /v1/flows with the
// feature just switched on.
func (c *CLI) demoFlows(ctx context.Context, workspaceID string) ([]listedFlow, error) {
	var list struct {
		Flows []listedFlow `json:"flows"`
	}
	req := &rpcv1.Request{WorkspaceId: workspaceID, Method: http.MethodGet, Path: "/v1/flows", Features: []string{featureFlowsAPI}}
	if err := c.call.CallRaw(ctx, rpc.ServiceFlowRunner, rpc.EndpointAPI, req, &list); err != nil {
		return nil, fmt.Errorf("list demo flows: %w", err)
	}
	return list.Flows, nil
}

// ensureDemoFlow makes sure the demo flow doc (named name, described by
// description) is published as this parleyctl and configuration describe
// it, given the workspace's flows as listed: created when missing, a new
// version when the one found differs, left alone otherwise.
func (c *CLI) ensureDemoFlow(ctx context.Context, workspaceID string, listed []listedFlow, doc []byte, name, description string) (demoFlowSummary, error) {
	flowID := ""
	for _, f := range listed {
		if f.Name != name {
			continue
		}
		if f.Description == description {
			return demoFlowSummary{ID: f.ID, Name: f.Name, PublishedVersion: f.PublishedVersion}, nil
		}
		flowID = f.ID
		break
	}
	published, err := c.publishFlow(ctx, "/admin/workspaces/"+url.PathEscape(workspaceID)+"/flows", flowID, doc)
	if err != nil {
		return demoFlowSummary{}, fmt.Errorf("publish demo flow %q: %w", name, err)
	}
	return demoFlowSummary{ID: published.ID, Name: name, PublishedVersion: published.PublishedVersion}, nil
}

// ensureDemoDocument adds the demo shop's policy to the demo workspace's
// knowledge base unless a document of its title is there.
func (c *CLI) ensureDemoDocument(ctx context.Context, workspaceID string) (addedDocument, error) {
	path := "/admin/workspaces/" + url.PathEscape(workspaceID) + "/kb/documents"
	var list struct {
		Documents []addedDocument `json:"documents"`
	}
	if err := c.call.CallJSON(ctx, rpc.ServiceFlowRunner, rpc.EndpointAdmin, "", http.MethodGet, path, nil, &list); err != nil {
		return addedDocument{}, fmt.Errorf("list demo documents: %w", err)
	}
	for _, d := range list.Documents {
		if d.Title == demoDocumentTitle {
			return d, nil
		}
	}
	var added struct {
		Document addedDocument `json:"document"`
	}
	body := map[string]string{"title": demoDocumentTitle, "markdown": string(demoDocument)}
	if err := c.call.CallJSON(ctx, rpc.ServiceFlowRunner, rpc.EndpointAdmin, "", http.MethodPost, path, body, &added); err != nil {
		return addedDocument{}, fmt.Errorf("add demo document: %w", err)
	}
	return added.Document, nil
}
