package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
)

// tgMessage renders a Telegram message update: the private chat of sender
// 7 with extra fields of the message's object merged in (nil deletes one).
func tgMessage(updateID int64, extra map[string]any) string {
	msg := map[string]any{
		"message_id": updateID,
		"from":       map[string]any{"id": 7, "is_bot": false, "first_name": "Eve"},
		"chat":       map[string]any{"id": 7, "type": "private", "first_name": "Eve"},
		"date":       1700000000,
	}
	for k, v := range extra {
		if v == nil {
			delete(msg, k)
			continue
		}
		msg[k] = v
	}
	b, _ := json.Marshal(map[string]any{"update_id": updateID, "message": msg})
	return string(b)
}

// TestTelegramIngressHostile posts what Telegram may send and what anyone
// who knows a channel id may send: every update a platform may legitimately
// send is answered an empty 200 (stored when it is a customer's text, once),
// everything else gets its documented error, never a 500.
func TestTelegramIngressHostile(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ch := h.telegramChannel(uuid.NewString(), "auto")
	long := strings.Repeat("ж", 4096)
	tests := []struct {
		name   string
		body   string
		status int
		code   string
		stored string // the text stored for it; "" when nothing is
	}{
		// Updates Parley does not handle.
		{"edited_message", `{"update_id":101,"edited_message":{"message_id":1,"from":{"id":7,"is_bot":false,"first_name":"A"},"chat":{"id":7,"type":"private"},"date":1700000000,"edit_date":1700000001,"text":"x"}}`, 200, "", ""},
		{"channel_post", `{"update_id":102,"channel_post":{"message_id":1,"chat":{"id":-1001,"type":"channel","title":"N"},"date":1700000000,"text":"x"}}`, 200, "", ""},
		{"edited_channel_post", `{"update_id":103,"edited_channel_post":{"message_id":1,"chat":{"id":-1001,"type":"channel"},"date":1700000000,"text":"x"}}`, 200, "", ""},
		{"my_chat_member", `{"update_id":104,"my_chat_member":{"chat":{"id":7,"type":"private"},"from":{"id":7,"is_bot":false,"first_name":"A"},"date":1700000000,"old_chat_member":{"status":"member","user":{"id":1,"is_bot":true,"first_name":"B"}},"new_chat_member":{"status":"kicked","user":{"id":1,"is_bot":true,"first_name":"B"}}}}`, 200, "", ""},
		{"inline_query", `{"update_id":105,"inline_query":{"id":"1","from":{"id":7,"is_bot":false,"first_name":"A"},"query":"q","offset":""}}`, 200, "", ""},
		{"poll", `{"update_id":106,"poll":{"id":"1","question":"?","options":[{"text":"a","voter_count":1}],"total_voter_count":1,"is_closed":false,"is_anonymous":true,"type":"regular","allows_multiple_answers":false}}`, 200, "", ""},
		{"poll_answer", `{"update_id":107,"poll_answer":{"poll_id":"1","user":{"id":7,"is_bot":false,"first_name":"A"},"option_ids":[0]}}`, 200, "", ""},
		{"message_reaction", `{"update_id":108,"message_reaction":{"chat":{"id":7,"type":"private"},"message_id":1,"user":{"id":7,"is_bot":false,"first_name":"A"},"date":1700000000,"old_reaction":[],"new_reaction":[{"type":"emoji","emoji":"👍"}]}}`, 200, "", ""},
		{"chat_join_request", `{"update_id":109,"chat_join_request":{"chat":{"id":-1001,"type":"supergroup"},"from":{"id":7,"is_bot":false,"first_name":"A"},"user_chat_id":7,"date":1700000000}}`, 200, "", ""},
		{"pre_checkout_query", `{"update_id":110,"pre_checkout_query":{"id":"1","from":{"id":7,"is_bot":false,"first_name":"A"},"currency":"EUR","total_amount":100,"invoice_payload":"p"}}`, 200, "", ""},
		{"an update kind of the future", `{"update_id":111,"business_message":{"message_id":1}}`, 200, "", ""},
		{"update_id alone", `{"update_id":112}`, 200, "", ""},
		// Messages without text.
		{"photo", tgMessage(201, map[string]any{"photo": []any{map[string]any{"file_id": "AgAC", "file_unique_id": "AQAD", "width": 90, "height": 90}}}), 200, "", ""},
		{"photo with caption", tgMessage(202, map[string]any{"photo": []any{map[string]any{"file_id": "AgAC", "file_unique_id": "AQAD", "width": 90, "height": 90}}, "caption": "look"}), 200, "", ""},
		{"sticker", tgMessage(203, map[string]any{"sticker": map[string]any{"file_id": "CAAC", "file_unique_id": "AgAD", "type": "regular", "width": 512, "height": 512, "is_animated": false, "is_video": false}}), 200, "", ""},
		{"location", tgMessage(204, map[string]any{"location": map[string]any{"latitude": 52.52, "longitude": 13.40}}), 200, "", ""},
		{"contact", tgMessage(205, map[string]any{"contact": map[string]any{"phone_number": "+4915100000000", "first_name": "A"}}), 200, "", ""},
		{"voice", tgMessage(206, map[string]any{"voice": map[string]any{"file_id": "AwAC", "file_unique_id": "AgAD", "duration": 3}}), 200, "", ""},
		{"document", tgMessage(207, map[string]any{"document": map[string]any{"file_id": "BQAC", "file_unique_id": "AgAD", "file_name": "a.pdf"}}), 200, "", ""},
		{"empty text", tgMessage(208, map[string]any{"text": ""}), 200, "", ""},
		{"without from", tgMessage(209, map[string]any{"from": nil, "text": "anonymous admin"}), 200, "", ""},
		// Text messages of every shape.
		{"group chat", tgMessage(301, map[string]any{"chat": map[string]any{"id": -4001, "type": "group", "title": "G"}, "text": "in a group"}), 200, "", "in a group"},
		{"forwarded", tgMessage(302, map[string]any{"forward_origin": map[string]any{"type": "user", "date": 1690000000, "sender_user": map[string]any{"id": 8, "is_bot": false, "first_name": "F"}}, "text": "forwarded"}), 200, "", "forwarded"},
		{"reply", tgMessage(303, map[string]any{"reply_to_message": map[string]any{"message_id": 1, "chat": map[string]any{"id": 7, "type": "private"}, "date": 1690000000, "text": "earlier"}, "text": "a reply"}), 200, "", "a reply"},
		{"4096 characters", tgMessage(304, map[string]any{"text": long}), 200, "", long},
		{"4097 characters", tgMessage(305, map[string]any{"text": long + "ж"}), 200, "", long + "ж"},
		{"emoji and RTL", tgMessage(306, map[string]any{"text": "👩‍👩‍👧 مرحبا \u202eabc"}), 200, "", "👩‍👩‍👧 مرحبا \u202eabc"},
		{"update_id 0", tgMessage(0, map[string]any{"text": "zero"}), 200, "", "zero"},
		{"negative update_id", tgMessage(-5, map[string]any{"text": "negative"}), 200, "", "negative"},
		{"largest update_id", fmt.Sprintf(`{"update_id":9223372036854775807,"message":{"message_id":9223372036854775807,"from":{"id":9223372036854775807,"is_bot":false,"first_name":"M"},"chat":{"id":-9223372036854775808,"type":"supergroup"},"date":1700000000,"text":"max"}}`), 200, "", "max"},
		{"date far in the future", tgMessage(307, map[string]any{"date": int64(1) << 62, "text": "future"}), 200, "", "future"},
		{"negative date", tgMessage(308, map[string]any{"date": -1, "text": "past"}), 200, "", "past"},
		// What no platform sends.
		{"update_id past int64", `{"update_id":9223372036854775808}`, 400, "invalid_request", ""},
		{"update_id a float", `{"update_id":1.5}`, 400, "invalid_request", ""},
		{"update_id a string", `{"update_id":"1"}`, 400, "invalid_request", ""},
		{"message_id a string", tgMessage(401, map[string]any{"message_id": "1", "text": "x"}), 400, "invalid_request", ""},
		{"text a number", tgMessage(402, map[string]any{"text": 5}), 400, "invalid_request", ""},
		{"not JSON", `update_id=1`, 400, "invalid_request", ""},
		{"an array", `[{"update_id":1}]`, 400, "invalid_request", ""},
		{"null", `null`, 400, "invalid_request", ""},
		{"empty", ``, 400, "invalid_request", ""},
		{"over 1 MiB", `{"update_id":403,"x":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "payload_too_large", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := 0; i < 2; i++ { // a redelivery answers the same
				rec := h.postUpdate(ch.ID, ch.Secret, tt.body)
				if tt.status == http.StatusOK {
					if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
						t.Fatalf("delivery %d: %d %q, want an empty 200", i, rec.Code, rec.Body)
					}
					continue
				}
				if code, _ := errorBody(t, rec.Body.Bytes()); rec.Code != tt.status || code != tt.code {
					t.Fatalf("delivery %d: %d %s, want %d %s", i, rec.Code, rec.Body, tt.status, tt.code)
				}
			}
			if tt.stored != "" {
				if n := h.count("messages", "content = ?", tt.stored); n != 1 {
					t.Fatalf("stored %d times, want once", n)
				}
			}
		})
	}
	// Only the text messages are stored, each once.
	want := int64(0)
	for _, tt := range tests {
		if tt.stored != "" {
			want++
		}
	}
	if n := h.count("messages", "sender = 'contact'"); n != want {
		t.Fatalf("stored %d customer messages, want %d", n, want)
	}
	// A date no clock gives is the update's arrival.
	wantPlausibleTimes(t, h, "messages", "conversations")
}

// wantPlausibleTimes fails unless every stored time of the tables lies
// between 2020 and now.
func wantPlausibleTimes(t *testing.T, h *harness, tables ...string) {
	t.Helper()
	columns := map[string]string{"messages": "created_at", "conversations": "last_customer_message_at", "comments": "created_at"}
	for _, table := range tables {
		col := columns[table]
		if n := h.count(table, col+" < '2020-01-01' OR "+col+" > now()"); n != 0 {
			t.Fatalf("%s: %d rows with an implausible %s", table, n, col)
		}
	}
}

// TestTelegramIngressHostileAddresses: a sender without the secret, or
// addressing a channel that is not one, is refused before anything is read
// or stored.
func TestTelegramIngressHostileAddresses(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ch := h.telegramChannel(uuid.NewString(), "external")
	body := tgMessage(1, map[string]any{"text": "let me in"})
	tests := []struct {
		name, path, secret string
		status             int
		code               string
	}{
		{"missing secret", ch.ID, "", 401, "unauthorized"},
		{"wrong secret", ch.ID, strings.ToUpper(ch.Secret), 401, "unauthorized"},
		{"secret with a suffix", ch.ID, ch.Secret + "x", 401, "unauthorized"},
		{"secret's prefix", ch.ID, ch.Secret[:len(ch.Secret)-1], 401, "unauthorized"},
		{"unknown channel", uuid.NewString(), ch.Secret, 404, "channel_not_found"},
		{"urn:uuid", "urn:uuid:" + ch.ID, ch.Secret, 404, "channel_not_found"},
		{"braced uuid", "%7B" + ch.ID + "%7D", ch.Secret, 404, "channel_not_found"},
		{"uuid without dashes", strings.ReplaceAll(ch.ID, "-", ""), ch.Secret, 404, "channel_not_found"},
		{"NUL", "%00", ch.Secret, 404, "channel_not_found"},
		{"NUL after the id", ch.ID + "%00", ch.Secret, 404, "channel_not_found"},
		{"invalid UTF-8", "%ff%fe", ch.Secret, 404, "channel_not_found"},
		{"SQL", "'%20OR%201=1--", ch.Secret, 404, "channel_not_found"},
		{"long", strings.Repeat("a", 4000), ch.Secret, 404, "channel_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := h.postUpdate(tt.path, tt.secret, body)
			if code, _ := errorBody(t, rec.Body.Bytes()); rec.Code != tt.status || code != tt.code {
				t.Fatalf("%d %s, want %d %s", rec.Code, rec.Body, tt.status, tt.code)
			}
		})
	}
	for _, table := range []string{"ingress_receipts", "contacts", "messages"} {
		if n := h.count(table, ""); n != 0 {
			t.Fatalf("%s has %d rows after refused updates", table, n)
		}
	}
}

// metaEntries renders a webhook post of object with the given entries.
func metaEntries(object string, entries ...map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"object": object, "entry": entries})
	return b
}

// TestMetaIngressHostile posts what Meta may send: every post is answered
// 200 (so that Meta stops redelivering), each customer message in it is
// stored once, and what carries none stores nothing.
func TestMetaIngressHostile(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "external")
	h.metaChannel(ws, "instagram", testIGID, "external")
	now := time.Now()
	party := func(id string) map[string]any { return map[string]any{"id": id} }
	event := func(fields map[string]any) metaEvent {
		e := metaEvent{"sender": party(testPSID), "recipient": party(testPageID), "timestamp": now.UnixMilli()}
		for k, v := range fields {
			if v == nil {
				delete(e, k)
				continue
			}
			e[k] = v
		}
		return e
	}
	page := func(events ...metaEvent) []byte { return notification("page", testPageID, events...) }
	attachment := func(typ string, payload any) map[string]any {
		return map[string]any{"type": typ, "payload": payload}
	}
	huge := strings.Repeat("🙂", 100_000)
	var manyEntries []map[string]any
	for i := 0; i < 50; i++ {
		id := testPageID
		if i%2 == 1 {
			id = fmt.Sprintf("99900%d", i)
		}
		var items []metaEvent
		for j := 0; j < 20; j++ {
			items = append(items, textEvent(id, testPSID, fmt.Sprintf("m_many_%d_%d", i, j), fmt.Sprintf("many %d %d", i, j), now))
		}
		manyEntries = append(manyEntries, map[string]any{"id": id, "time": now.UnixMilli(), "messaging": items})
	}

	tests := []struct {
		name   string
		body   []byte
		stored []string // the texts stored for it, each once
	}{
		{"many entries and items, half for unknown pages", metaEntries("page", manyEntries...), func() []string {
			var s []string
			for i := 0; i < 50; i += 2 {
				for j := 0; j < 20; j++ {
					s = append(s, fmt.Sprintf("many %d %d", i, j))
				}
			}
			return s
		}()},
		{"echo", page(event(map[string]any{"sender": party(testPageID), "recipient": party(testPSID), "message": map[string]any{"mid": "m_echo", "text": "echo", "is_echo": true, "app_id": 1}})), nil},
		{"echo flag from a customer id", page(event(map[string]any{"message": map[string]any{"mid": "m_echo2", "text": "echo2", "is_echo": true}})), nil},
		{"delivery", page(event(map[string]any{"delivery": map[string]any{"mids": []string{"m_1"}, "watermark": now.UnixMilli()}})), nil},
		{"read", page(event(map[string]any{"read": map[string]any{"watermark": now.UnixMilli()}})), nil},
		{"reaction", page(event(map[string]any{"reaction": map[string]any{"mid": "m_1", "action": "react", "reaction": "love", "emoji": "❤"}})), nil},
		{"referral", page(event(map[string]any{"referral": map[string]any{"ref": "x", "source": "SHORTLINK", "type": "OPEN_THREAD"}})), nil},
		{"optin", page(event(map[string]any{"optin": map[string]any{"type": "notification_messages", "payload": "p"}})), nil},
		{"postback without payload", page(event(map[string]any{"postback": map[string]any{"mid": "m_pb_empty", "title": "Get Started"}})), []string{"Get Started"}},
		{"postback without title or payload", page(event(map[string]any{"postback": map[string]any{"mid": "m_pb_bare"}})), nil},
		{"quick reply", page(event(map[string]any{"message": map[string]any{"mid": "m_qr", "text": "Red", "quick_reply": map[string]any{"payload": "COLOR_RED"}}})), []string{"Red"}},
		{"quick reply without payload", page(event(map[string]any{"message": map[string]any{"mid": "m_qr2", "text": "Blue", "quick_reply": map[string]any{}}})), []string{"Blue"}},
		{"attachments of every type", page(event(map[string]any{"message": map[string]any{"mid": "m_att", "text": "all", "attachments": []any{
			attachment("image", map[string]any{"url": "https://cdn.example/i.jpg"}),
			attachment("video", map[string]any{"url": "https://cdn.example/v.mp4"}),
			attachment("audio", map[string]any{"url": "https://cdn.example/a.mp4"}),
			attachment("file", map[string]any{"url": "https://cdn.example/f.pdf"}),
			attachment("location", map[string]any{"coordinates": map[string]any{"lat": 1.5, "long": 2.5}}),
			attachment("fallback", map[string]any{"url": "https://example.com", "title": "link"}),
			attachment("template", map[string]any{"template_type": "generic", "elements": []any{}}),
			attachment("sticker", map[string]any{"url": "https://cdn.example/s.png", "sticker_id": 369239263222822}),
			attachment("story_mention", map[string]any{"url": "https://cdn.example/story"}),
			attachment("ig_reel", map[string]any{"reel_video_id": "1", "title": "t", "url": "https://cdn.example/r"}),
			attachment("share", map[string]any{"url": "https://cdn.example/p"}),
			attachment("", nil),
			map[string]any{},
		}}})), []string{"all"}},
		{"an event that cannot be read among good ones", page(
			event(map[string]any{"message": map[string]any{"mid": "m_bad_1", "attachments": []any{attachment("image", "not an object")}}}),
			event(map[string]any{"message": map[string]any{"mid": "m_bad_2", "text": 5}}),
			event(map[string]any{"message": "hi"}),
			event(map[string]any{"sender": map[string]any{"id": 6843201987654321}, "message": map[string]any{"mid": "m_bad_3", "text": "numeric sender"}}),
			event(map[string]any{"message": map[string]any{"mid": "m_after_bad", "text": "after the bad ones"}}),
		), []string{"after the bad ones"}},
		{"mid repeated in one post", page(
			event(map[string]any{"message": map[string]any{"mid": "m_twice", "text": "twice"}}),
			event(map[string]any{"message": map[string]any{"mid": "m_twice", "text": "twice"}}),
		), []string{"twice"}},
		{"missing sender", page(event(map[string]any{"sender": nil, "message": map[string]any{"mid": "m_nosender", "text": "who"}})), nil},
		{"empty sender", page(event(map[string]any{"sender": map[string]any{}, "message": map[string]any{"mid": "m_nosender2", "text": "who2"}})), nil},
		{"missing timestamp", page(event(map[string]any{"timestamp": nil, "message": map[string]any{"mid": "m_nots", "text": "no time"}})), []string{"no time"}},
		{"timestamp far in the future", page(event(map[string]any{"timestamp": int64(1) << 62, "message": map[string]any{"mid": "m_future", "text": "future"}})), []string{"future"}},
		{"negative timestamp", page(event(map[string]any{"timestamp": -1000, "message": map[string]any{"mid": "m_past", "text": "past"}})), []string{"past"}},
		{"without mid", page(event(map[string]any{"message": map[string]any{"text": "no mid"}})), []string{"no mid"}},
		{"huge text", page(event(map[string]any{"message": map[string]any{"mid": "m_huge", "text": huge}})), []string{huge}},
		{"emoji and RTL", page(event(map[string]any{"message": map[string]any{"mid": "m_rtl", "text": "مرحبا 👋 \u202e"}})), []string{"مرحبا 👋 \u202e"}},
		{"deleted and unsupported", page(
			event(map[string]any{"message": map[string]any{"mid": "m_del", "is_deleted": true}}),
			event(map[string]any{"message": map[string]any{"mid": "m_uns", "is_unsupported": true}}),
		), nil},
		{"entry without messaging", metaEntries("page", map[string]any{"id": testPageID, "time": 1}), nil},
		{"no entries", metaEntries("page"), nil},
		{"entry null", []byte(`{"object":"page","entry":[null]}`), nil},
		{"another object", []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[]}]}`), nil},
		{"instagram", notification("instagram", testIGID, metaEvent{"sender": party(testIGSID), "recipient": party(testIGID), "timestamp": now.UnixMilli(), "message": map[string]any{"mid": "m_ig_h", "text": "insta"}}), []string{"insta"}},
		{"comment with odd fields", metaEntries("page", map[string]any{"id": testPageID, "time": now.Unix(), "changes": []any{
			map[string]any{"field": "feed", "value": map[string]any{"item": "comment", "verb": "add", "comment_id": "c_odd_1", "post_id": "p_1", "message": "odd", "created_time": "yesterday"}},
			map[string]any{"field": "feed", "value": map[string]any{"item": "comment", "verb": "add", "comment_id": "c_odd_2", "message": "far", "created_time": int64(1) << 62}},
			map[string]any{"field": "feed", "value": map[string]any{"item": "comment", "verb": "add", "message": "no id", "created_time": now.Unix()}},
			map[string]any{"field": "feed", "value": "a string"},
			map[string]any{"field": "feed", "value": nil},
			map[string]any{"field": "feed", "value": map[string]any{"item": "comment", "verb": "add", "comment_id": "c_odd_3", "post_id": "p_1", "from": map[string]any{"id": testPageID, "name": "Page"}, "message": "own", "created_time": now.Unix()}},
			map[string]any{"field": "feed", "value": map[string]any{"item": "comment", "verb": "add", "comment_id": "c_odd_4", "post_id": "p_1", "from": map[string]any{"id": "1234"}, "message": strings.Repeat("w", 100_000), "created_time": now.Unix()}},
			map[string]any{"field": "feed", "value": map[string]any{"item": "reaction", "verb": "add", "reaction_type": "like"}},
			map[string]any{"field": "mention", "value": map[string]any{"post_id": "p_2"}},
		}}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := 0; i < 2; i++ { // a redelivery answers the same and stores nothing more
				if rec := h.postMeta(tt.body, meta.Sign(metaAppSecret, tt.body)); rec.Code != http.StatusOK {
					t.Fatalf("delivery %d: %d %s, want 200", i, rec.Code, rec.Body)
				}
			}
			for _, text := range tt.stored {
				if n := h.count("messages", "content = ?", text); n != 1 {
					t.Fatalf("%.40q stored %d times, want once", text, n)
				}
			}
		})
	}
	for _, id := range []string{"c_odd_2", "c_odd_4"} {
		if n := h.count("comments", "external_id = ?", id); n != 1 {
			t.Fatalf("comment %s stored %d times, want once", id, n)
		}
	}
	// Both channels are external: each stored message and comment is
	// forwarded once, redeliveries included.
	if w, m := int64(len(h.written())), h.count("messages", "sender = 'contact'")+h.count("comments", ""); w != m {
		t.Fatalf("%d events written for %d stored messages and comments", w, m)
	}
	// A timestamp no clock gives is the message's or comment's arrival.
	wantPlausibleTimes(t, h, "messages", "conversations", "comments")
}

// TestMetaIngressHostileEntries: an entry, or a change of one, of a shape
// Meta never sends is dropped and counted, and the rest of the post is
// stored and answered 200, so that Meta does not redeliver the good events
// with it forever.
func TestMetaIngressHostileEntries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	h.metaChannel(uuid.NewString(), "messenger", testPageID, "external")
	now := time.Now()
	good := func(mid, text string) []metaEvent {
		return []metaEvent{textEvent(testPageID, testPSID, mid, text, now)}
	}
	comment := map[string]any{"field": "feed", "value": map[string]any{
		"item": "comment", "verb": "add", "comment_id": "c_entries", "post_id": "p_1", "message": "kept", "created_time": now.Unix(),
	}}
	body, _ := json.Marshal(map[string]any{"object": "page", "entry": []any{
		map[string]any{"id": testPageID, "time": now.UnixMilli(), "messaging": good("m_entries_1", "before")},
		"an entry that is a string",
		5,
		[]any{map[string]any{"id": testPageID}},
		map[string]any{"id": 5, "messaging": good("m_entries_2", "id a number")},
		map[string]any{"id": testPageID, "time": "yesterday", "messaging": good("m_entries_3", "time a string")},
		map[string]any{"id": testPageID, "messaging": map[string]any{"0": good("m_entries_4", "messaging an object")[0]}},
		map[string]any{"id": testPageID, "messaging": "x"},
		map[string]any{"id": testPageID, "changes": map[string]any{"field": "feed"}},
		map[string]any{"id": testPageID, "time": now.Unix(), "changes": []any{
			map[string]any{"field": 5, "value": map[string]any{}}, "a change that is a string", comment,
		}},
		map[string]any{"id": testPageID, "time": now.UnixMilli(), "messaging": good("m_entries_5", "after")},
	}})
	for i := 0; i < 2; i++ { // a redelivery answers the same and stores nothing more
		if rec := h.postMeta(body, meta.Sign(metaAppSecret, body)); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
			t.Fatalf("delivery %d: %d %s, want an empty 200", i, rec.Code, rec.Body)
		}
	}
	if n := h.count("messages", ""); n != 2 || h.count("messages", "content IN ('before', 'after')") != 2 {
		t.Fatalf("stored %d messages, want before and after", n)
	}
	if n := h.count("comments", "external_id = 'c_entries'"); n != 1 {
		t.Fatalf("comment stored %d times, want once", n)
	}
	// Per delivery: 8 entries and 2 changes dropped.
	if n := h.metric("parley_messaging_ingress_updates_total", "platform", "messenger", "outcome", "invalid"); n != 20 {
		t.Fatalf("%v counted invalid, want 20", n)
	}
}

// TestMetaIngressHostileSignatures: without the app secret nothing is
// taken; a signed body that is not a notification is 400.
func TestMetaIngressHostileSignatures(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	h.metaChannel(uuid.NewString(), "messenger", testPageID, "external")
	body := notification("page", testPageID, textEvent(testPageID, testPSID, "m_sig", "signed?", time.Now()))
	sig := meta.Sign(metaAppSecret, body)
	hexSig := strings.TrimPrefix(sig, "sha256=")
	post := func(body []byte, header http.Header) reply {
		req, err := http.NewRequest(http.MethodPost, h.base+"/ingress/meta", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		return h.do(req)
	}
	one := func(v string) http.Header { return http.Header{meta.SignatureHeader: {v}} }
	refused := []struct {
		name   string
		header http.Header
	}{
		{"empty", one("")},
		{"prefix only", one("sha256=")},
		{"no prefix", one(hexSig)},
		{"upper-case prefix", one("SHA256=" + hexSig)},
		{"sha1", one("sha1=" + hexSig)},
		{"sha512 of the body", one("sha512=" + hexSig + hexSig)},
		{"truncated", one(sig[:len(sig)-2])},
		{"longer", one(sig + "00")},
		{"odd length", one(sig + "0")},
		{"two values in one", one(sig + "," + sig)},
		{"a wrong one first", http.Header{meta.SignatureHeader: {"sha256=00", sig}}},
		{"sha1 header only", http.Header{"X-Hub-Signature": {"sha1=" + hexSig}}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			rec := post(body, tt.header)
			if code, _ := errorBody(t, rec.Body.Bytes()); rec.Code != http.StatusUnauthorized || code != "unauthorized" {
				t.Fatalf("%d %s, want 401 unauthorized", rec.Code, rec.Body)
			}
		})
	}
	if n := h.count("messages", ""); n != 0 {
		t.Fatalf("refused posts stored %d messages", n)
	}
	// Upper-case hex is the same signature.
	if rec := post(body, one("sha256="+strings.ToUpper(hexSig))); rec.Code != http.StatusOK {
		t.Fatalf("upper-case hex: %d %s", rec.Code, rec.Body)
	}
	// Signed garbage: not a notification.
	for _, garbage := range []string{`not json`, `[1]`, `{"object":"page","entry":{"id":1}}`, `{"object":5}`, `"page"`} {
		rec := post([]byte(garbage), one(meta.Sign(metaAppSecret, []byte(garbage))))
		if code, _ := errorBody(t, rec.Body.Bytes()); rec.Code != http.StatusBadRequest || code != "invalid_request" {
			t.Fatalf("signed %q: %d %s, want 400 invalid_request", garbage, rec.Code, rec.Body)
		}
	}
	// A post that is a notification, whatever its entries: the ones that
	// cannot be read are dropped (TestMetaIngressHostileEntries).
	for _, ok := range []string{`null`, `{}`, `{"object":"page"}`, `{"object":"page","entry":[{"id":5}]}`} {
		if rec := post([]byte(ok), one(meta.Sign(metaAppSecret, []byte(ok)))); rec.Code != http.StatusOK {
			t.Fatalf("signed %q: %d %s, want 200", ok, rec.Code, rec.Body)
		}
	}
}

// TestMetaVerifyHostile: the subscription check echoes only what it was
// given, as plain text, and only with the verify token.
func TestMetaVerifyHostile(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	ok := "hub.mode=subscribe&hub.verify_token=" + metaVerifyToken
	for _, challenge := range []string{"", "0", "-1", "%3Cscript%3Ealert(1)%3C%2Fscript%3E", "%E2%80%AE%F0%9F%99%82", strings.Repeat("9", 2000)} {
		rec := h.get("/ingress/meta?" + ok + "&hub.challenge=" + challenge)
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("challenge %q: %d %s %q", challenge, rec.Code, rec.Header.Get("Content-Type"), rec.Body)
		}
	}
	for _, q := range []string{"", "hub.mode=subscribe", ok + "x", "hub.mode=subscribe&hub.verify_token=" + metaVerifyToken + "%00", "hub.mode=subscribe&hub.verify_token=&hub.challenge=1",
		"hub.mode=SUBSCRIBE&hub.verify_token=" + metaVerifyToken} {
		rec := h.get("/ingress/meta?" + q)
		if code, _ := errorBody(t, rec.Body.Bytes()); rec.Code != http.StatusForbidden || code != "verification_failed" {
			t.Fatalf("%q: %d %s, want 403 verification_failed", q, rec.Code, rec.Body)
		}
	}
}

// TestIngressHostileConcurrentRedeliveries: the same update and the same
// Meta post arriving at once, as a platform retrying a slow answer does,
// are each answered 200 and stored and forwarded once.
func TestIngressHostileConcurrentRedeliveries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	ws := uuid.NewString()
	tg := h.telegramChannel(ws, "external")
	h.metaChannel(ws, "messenger", testPageID, "external")
	update := tgMessage(60, map[string]any{"text": "at once on telegram"})
	post := notification("page", testPageID, textEvent(testPageID, testPSID, "m_at_once", "at once on messenger", time.Now()))
	const n = 8
	codes := make(chan int, 2*n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); codes <- h.postUpdate(tg.ID, tg.Secret, update).Code }()
		go func() { defer wg.Done(); codes <- h.postMeta(post, meta.Sign(metaAppSecret, post)).Code }()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Fatalf("a concurrent delivery got %d", code)
		}
	}
	for _, text := range []string{"at once on telegram", "at once on messenger"} {
		if c := h.count("messages", "content = ?", text); c != 1 {
			t.Fatalf("%q stored %d times", text, c)
		}
	}
	if c := len(h.written()); c != 2 {
		t.Fatalf("%d events written, want 2", c)
	}
}
