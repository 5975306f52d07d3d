package db

import (
	"strings"
	"unicode/utf8"
)

// Storable reports whether PostgreSQL text can hold s: valid UTF-8
// without a NUL. A string that is not cannot be in any row, so a store
// looking one up answers "not found" instead of sending it, which
// PostgreSQL would refuse with an error (a 500 for an operator's typo).
func Storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
