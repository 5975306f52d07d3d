package account

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Slugify derives a slug from a workspace name: accents dropped ("Café" ->
// "cafe"), lowercase, every run of other characters turned into one hyphen,
// no hyphen at either end, at most MaxSlugLength characters. It returns ""
// when nothing usable is left (a name in a non-Latin script), and the caller
// must then ask for a slug.
func Slugify(name string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range norm.NFKD.String(name) {
		switch {
		case unicode.Is(unicode.Mn, r):
			// combining mark left by the decomposition: drop it
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(unicode.ToLower(r))
		default:
			hyphen = true
		}
		if b.Len() >= MaxSlugLength {
			break
		}
	}
	s := b.String()
	if len(s) > MaxSlugLength {
		s = s[:MaxSlugLength]
	}
	return strings.TrimRight(s, "-")
}

// ValidateSlug checks a slug an operator chose: 1 to MaxSlugLength
// characters of a-z, 0-9 and single hyphens, not starting or ending with one.
func ValidateSlug(slug string) error {
	bad := invalid("slug", "must be 1 to %d lowercase letters, digits and single hyphens, not starting or ending with a hyphen", MaxSlugLength)
	if slug == "" || len(slug) > MaxSlugLength || slug[0] == '-' || slug[len(slug)-1] == '-' || strings.Contains(slug, "--") {
		return bad
	}
	for _, r := range slug {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return bad
		}
	}
	return nil
}
