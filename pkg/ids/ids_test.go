package ids

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	const id = "01a2263e-554f-7bb9-9a4c-fd73f54e6884"
	for _, s := range []string{id, strings.ToUpper(id), "00000000-0000-0000-0000-000000000000"} {
		if !Valid(s) {
			t.Errorf("Valid(%q) = false, want true", s)
		}
	}
	for _, s := range []string{
		"", "not-a-uuid", "urn:uuid:" + id, "{" + id + "}", strings.ReplaceAll(id, "-", ""),
		id[:35], id + "0", " " + id[1:], "01a2263e-554f-7bb9-9a4c-fd73f54e688g", "01a2263e_554f-7bb9-9a4c-fd73f54e6884",
		"01a2263e-554f-7bb9-9a4cfd73f54e68840", "01a2263e-554f-7bb9-9a4c-fd73f54e688\x00", "../../../../../../../../../../../../..",
	} {
		if Valid(s) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}

func TestCanonical(t *testing.T) {
	const id = "01a2263e-554f-7bb9-9a4c-fd73f54e6884"
	for give, want := range map[string]string{
		id: id, strings.ToUpper(id): id, "urn:uuid:" + id: id, "{" + id + "}": id,
		strings.ReplaceAll(id, "-", ""): id, "Not-An-ID": "not-an-id", "": "",
	} {
		if got := Canonical(give); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", give, got, want)
		}
	}
}
