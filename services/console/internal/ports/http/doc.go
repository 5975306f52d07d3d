// Package http is the console's ports: the pages operators use in a
// browser (NewPublic), and the admin endpoint parleyctl calls over NATS
// (NewAdmin).
package http
