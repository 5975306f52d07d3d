package apicheck

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// HeaderEvent names a delivery's event, and so the document's webhook it
// must match.
const HeaderEvent = "X-Service-Event"

// CheckWebhook (counted in Exchanges) fails the test if the delivery a receiver got is not what
// the document's webhook for its event describes: the X-Service-* headers
// (the signature's value is Verify's business, its presence the
// document's) and the JSON body.
//
// Each event's first WebhookChecksPerEvent deliveries are validated and
// the rest pass unchecked: a validation costs milliseconds of CPU (tens
// under -race), and a test of thousands of deliveries of one event (the
// dispatcher's fault and isolation tests) would spend minutes validating
// the same shape again while the services it measures wait for the CPU.
func (c *Checker) CheckWebhook(got receiver.Request) {
	if !c.sampleWebhook(got.Event()) {
		return
	}
	c.exchanges.Add(1)
	if err := c.doc.ValidateWebhook(got.Header, got.Body); err != nil {
		c.report(Mismatch{Method: got.Method, Path: "webhook " + got.Event(), Reason: err.Error()})
	}
}

// WebhookChecksPerEvent is how many deliveries of each event a Checker
// validates.
const WebhookChecksPerEvent = 20

// sampleWebhook says whether the next delivery of event is to be validated.
func (c *Checker) sampleWebhook(event string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.webhooks == nil {
		c.webhooks = map[string]int{}
	}
	c.webhooks[event]++
	return c.webhooks[event] <= WebhookChecksPerEvent
}

// ValidateWebhook validates a delivery's headers and body against the
// webhook of the document for its X-Service-Event.
func (d *Document) ValidateWebhook(h http.Header, body []byte) error {
	event := h.Get(HeaderEvent)
	name, item := d.webhookFor(event)
	if item == nil {
		return fmt.Errorf("no webhook in the document for %s %q (webhooks: %v)", HeaderEvent, event, d.webhookNames())
	}
	op := item.Post
	if op == nil {
		return fmt.Errorf("webhook %q documents no POST", name)
	}
	req, err := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h.Clone()
	req.ContentLength = int64(len(body))
	in := &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   &routers.Route{Spec: d.T, Path: name, PathItem: item, Method: http.MethodPost, Operation: op},
		Options: &openapi3filter.Options{
			MultiError:          true,
			SkipSettingDefaults: true,
			// A delivery is signed, not authenticated by a key.
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		},
	}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return fmt.Errorf("webhook %q: %w", name, err)
	}
	return nil
}

// webhookFor finds the webhook of event: the one named after it, else the
// one whose X-Service-Event header parameter lists it.
func (d *Document) webhookFor(event string) (string, *openapi3.PathItem) {
	if item, ok := d.T.Webhooks[event]; ok {
		return event, item
	}
	for _, name := range d.webhookNames() {
		item := d.T.Webhooks[name]
		if item.Post == nil {
			continue
		}
		for _, p := range append(slices.Clone(item.Parameters), item.Post.Parameters...) {
			v := p.Value
			if v == nil || v.In != openapi3.ParameterInHeader || http.CanonicalHeaderKey(v.Name) != HeaderEvent || v.Schema == nil || v.Schema.Value == nil {
				continue
			}
			if slices.Contains(v.Schema.Value.Enum, any(event)) || v.Schema.Value.Const == any(event) {
				return name, item
			}
		}
	}
	return "", nil
}

func (d *Document) webhookNames() []string {
	names := make([]string, 0, len(d.T.Webhooks))
	for n := range d.T.Webhooks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
