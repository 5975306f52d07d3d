package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestChatQuestionExpiresAfterChatSessionTTL: a chat run waiting at a
// question waits CHAT_SESSION_TTL, read by the built flow-runner under
// that name; a message after it starts a new run, which asks again,
// instead of answering the expired one (docs/chat.md "Chat runs").
func TestChatQuestionExpiresAfterChatSessionTTL(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	cs := startChatSuite(t, "CHAT_SESSION_TTL="+ttl.String())
	services := cs.services(t)
	sh := cs.shop(t, "auto", 10)
	sh.setFlow(t, orderFlow)
	const chat = 9301

	sh.writes(t, 1, chat, "where is my parcel?")
	if got := sh.waitSent(t, chat, 1); got[0] != "Your order number?" {
		t.Fatalf("first answer %q", got)
	}
	conv := sh.conversation(t, chat)
	time.Sleep(ttl + time.Second)
	sh.writes(t, 2, chat, "A-1234")
	if got := sh.waitSent(t, chat, 2); !slices.Equal(got, []string{"Your order number?", "Your order number?"}) {
		t.Fatalf("answers %q; want the question asked again by a new run", got)
	}
	var runs []string
	waitFor(t, 20*time.Second, func() bool { runs = sh.chatRunsOf(t, services, conv); return len(runs) == 2 },
		func() string { return fmt.Sprintf("chat runs %v, want the expired one and a new one", runs) })
}
