package db

import "testing"

func TestStorable(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "ann@example.com": true, "ünïcode ✓": true,
		"a\x00b": false, "\x00": false, "\xff\xfe": false, "ok\xc3": false,
	} {
		if got := Storable(s); got != want {
			t.Errorf("Storable(%q) = %v, want %v", s, got, want)
		}
	}
}
