package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestUploadLimits: a chosen file over the flow-runner's bound (1 MiB for
// a flow document, 512 KiB for Markdown) is refused by the console in
// words, the form drawn again, and nothing is sent; a file within it goes
// (a flow document of 900 KiB: one NATS message, 1 MiB by default, also
// carries the request around it).
func TestUploadLimits(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	base := "/workspaces/" + s.ws
	for _, tc := range []struct {
		name, path, say string
		fields          map[string]string
		limit, fits     int
		sentTo          string
	}{
		{name: "flow document", path: base + "/flows", say: "larger than 1024 KiB", limit: 1 << 20, fits: 900 << 10,
			fields: map[string]string{"csrf_token": s.csr}, sentTo: "/admin/workspaces/" + s.ws + "/flows"},
		{name: "markdown", path: base + "/kb", say: "larger than 512 KiB", limit: 512 << 10, fits: 512 << 10,
			fields: map[string]string{"csrf_token": s.csr, "title": "Big"}, sentTo: "/admin/workspaces/" + s.ws + "/kb/documents"},
	} {
		over := s.b.postMultipart(tc.path, tc.fields, &upload{field: "file", name: "big", content: []byte(strings.Repeat("x", tc.limit+1))})
		if over.status != http.StatusBadRequest || !strings.Contains(over.body, tc.say) {
			t.Fatalf("%s of %d bytes = %d: %.300s", tc.name, tc.limit+1, over.status, over.body)
		}
		if s.fr.receivedAny(http.MethodPost, tc.sentTo) {
			t.Fatalf("%s over the limit reached the flow-runner", tc.name)
		}
		at := s.b.postMultipart(tc.path, tc.fields, &upload{field: "file", name: "big", content: []byte(strings.Repeat("x", tc.fits))})
		if strings.Contains(at.body, tc.say) || len(s.fr.lastCall(t, http.MethodPost, tc.sentTo).body) == 0 {
			t.Fatalf("%s of %d bytes was refused by the console (%d): %.300s", tc.name, tc.fits, at.status, at.body)
		}
	}
}
