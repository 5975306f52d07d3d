// Package ids checks the ids the services make and answer with: UUIDs in
// their canonical form.
package ids

import (
	"strings"

	"github.com/google/uuid"
)

// Valid reports whether s is an id as the services write it: a UUID in its
// canonical form, 36 characters of hexadecimal digits (either case) in
// groups of 8-4-4-4-12 joined by hyphens. Every other string is no id:
// looked up it is not found, or refused as the route says, and it never
// reaches a uuid column. uuid.Parse and uuid.Validate also take
// `urn:uuid:…`, braces and a UUID without hyphens; PostgreSQL refuses the
// first with an error (an operator's typo was a 500), and no service ever
// answers with any of them.
func Valid(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Canonical is id as PostgreSQL prints a uuid (lower case, hyphenated), so
// that ids read back from a uuid column compare equal to those given in
// any form uuid.Parse takes; any other string, lower-cased.
func Canonical(id string) string {
	if u, err := uuid.Parse(id); err == nil {
		return u.String()
	}
	return strings.ToLower(id)
}
