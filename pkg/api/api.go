// Package api is the one home of every JSON body that crosses a process
// (docs/architecture.md "Wire types"). Each subpackage is one service's
// API: messaging, gateway, dispatcher, flowrunner and console declare the
// request and response bodies of that service's public (/v1), admin and
// rpc routes, and a table of those routes. The owning service renders the
// types; pkg/adminclient, the gateway, parleyctl and the console decode the
// same types, so a field added to a body is one edit, and a consumer that
// disagrees no longer builds.
//
// Every subpackage's Routes tables are checked against the routes its
// service serves (apicheck.CheckDeclaredRoutes in the service's ports
// tests), so a route added, moved or removed on one side only fails a test.
package api

// Route is one route of a service endpoint and the bodies it takes and
// answers.
type Route struct {
	// Method is the HTTP method, "POST".
	Method string
	// Path is the route in echo's syntax: "/admin/channels/:id".
	Path string
	// Request and Response are zero values of the JSON bodies the route
	// takes and answers on success, nil where it takes or answers none
	// (or a body that is not JSON: a flow document, an event stream).
	Request, Response any
}

// OK is the answer of a route that has nothing to return but its success
// ({"ok": true}: the OpenAPI document's Ok).
type OK struct {
	OK bool `json:"ok"`
}
