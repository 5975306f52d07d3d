package e2e

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsoleSignInOverPlainHTTP is docker compose's sign-in, in headless
// Chromium: the browser reaches the console over plain HTTP at an address
// that is not loopback (in compose, a published port, which the console
// sees from Docker's bridge). Without CONSOLE_INSECURE_COOKIES the console
// marks its cookies Secure, the browser drops them, sign-in fails and the
// sign-in page says why; with it, sign-in works and the page says the
// cookie travels in the clear.
func TestConsoleSignInOverPlainHTTP(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	host := nonLoopbackIPv4(t)
	s := startSuite(t)
	// Two consoles on that address, without and with the setting; an
	// operator (created through either: they share the suite).
	consoleAt := func(insecure bool) string {
		return "http://" + s.startExtraOn(t, host, "console", "CONSOLE_ADDR", fmt.Sprintf("CONSOLE_INSECURE_COOKIES=%t", insecure)).addr
	}
	secure, insecure := consoleAt(false), consoleAt(true)
	wsID, _ := s.developer(t)
	email, password := "compose-"+uuid.NewString()[:8]+"@example.com", "correct horse battery staple"
	s.createOperator(t, email, wsID, password)

	tests := []struct {
		name    string
		console string
		// notice is a phrase of the sign-in page's plain-HTTP notice.
		notice   string
		signedIn bool
	}{
		{"secure cookies", secure, "sign-in works only when the console is reached over HTTPS", false},
		{"CONSOLE_INSECURE_COOKIES", insecure, "sends its sign-in cookie over plain HTTP too", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			console := tt.console
			b := newBrowser(t)
			b.openSignIn(t, console)
			if notice := runFor(t, b, chromedp.TextContent(chromedp.CSS("p.notice"))); !strings.Contains(notice, tt.notice) {
				t.Errorf("the sign-in page's notice: %q, want it to say %q", notice, tt.notice)
			}
			b.signIn(t, email, password)
			want := console + "/login"
			if tt.signedIn {
				want = console + "/workspaces/" + wsID
			}
			if loc := runFor(t, b, chromedp.Location()); loc != want {
				t.Fatalf("after signing in the browser is at %s, want %s", loc, want)
			}
			if tt.signedIn {
				// The session holds on the next page too.
				b.run(t, chromedp.Navigate(console+"/workspaces/"+wsID+"/keys"), chromedp.WaitVisible(chromedp.CSS("#key-name")))
			}
		})
	}
}

// nonLoopbackIPv4 is an IPv4 address of this machine other than loopback,
// where a browser on this machine reaches a server as it would from
// another; on a machine without one the test is skipped, or fails in CI
// (CI=true), where no test skips silently.
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("this machine has no IPv4 address but loopback, which the test needs to reach the console as from another machine")
	}
	t.Skip("this machine has no IPv4 address but loopback")
	return ""
}
