// Package http is the console's ports: the pages operators use in a
// browser (Console), and the admin endpoint parleyctl calls over NATS
// (Admin).
package http
