package messaging

import (
	"unicode/utf8"
)

// AppendJSON appends p as encoding/json encodes it (HTML-safe escaping
// included), byte for byte, without reflection: GET /v1/conversations is
// the API's busiest page, and reflecting over its fifty conversations
// cost a tenth of the service's time for the read.
func (p ConversationPage) AppendJSON(b []byte) []byte {
	b = append(b, `{"conversations":`...)
	if p.Conversations == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, c := range p.Conversations {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.appendJSON(b)
		}
		b = append(b, ']')
	}
	b = append(b, `,"next_before":`...)
	if p.NextBefore == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, *p.NextBefore)
	}
	return append(b, '}')
}

func (c Conversation) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, c.ID)
	b = append(b, `,"platform":`...)
	b = appendString(b, c.Platform)
	b = append(b, `,"channel_id":`...)
	b = appendString(b, c.ChannelID)
	b = append(b, `,"contact":{"id":`...)
	b = appendString(b, c.Contact.ID)
	b = append(b, `,"sender_id":`...)
	b = appendString(b, c.Contact.SenderID)
	b = append(b, `,"name":`...)
	b = appendString(b, c.Contact.Name)
	b = append(b, `,"profile_pic":`...)
	b = appendString(b, c.Contact.ProfilePic)
	b = append(b, `},"last_message_at":`...)
	b = appendString(b, c.LastMessageAt)
	b = append(b, `,"created_at":`...)
	b = appendString(b, c.CreatedAt)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json quotes a string: the
// short escapes it uses, \u00XX for other control characters and for <,
// > and &, \ufffd for each invalid UTF-8 byte, and \u2028 and \u2029
// escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
