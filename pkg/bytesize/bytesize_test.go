package bytesize

import "testing"

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Size{
		"0": 0, "65536": 65536, "1MiB": MiB, "1 MiB": MiB, " 512KiB ": 512 * KiB, "2GiB": 2 * GiB, "100B": 100, "100 B": 100,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1MB", "1.5MiB", "-1", "MiB", "1 mib", "9000000000GiB", "1 KiB B"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d; want an error", in, got)
		}
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	for n, want := range map[Size]string{
		0: "0 bytes", 1000: "1000 bytes", KiB: "1 KiB", 64 * KiB: "64 KiB", MiB: "1 MiB", MiB + KiB: "1025 KiB", 3 * GiB: "3 GiB", MiB + 1: "1048577 bytes",
	} {
		if got := n.String(); got != want {
			t.Errorf("Size(%d) = %q; want %q", int64(n), got, want)
		}
	}
}

func TestUnmarshalText(t *testing.T) {
	t.Parallel()
	var s Size
	if err := s.UnmarshalText([]byte("4MiB")); err != nil || s != 4*MiB {
		t.Fatalf("UnmarshalText(4MiB) = %d, %v", s, err)
	}
	if err := s.UnmarshalText([]byte("4 MB")); err == nil {
		t.Fatal("UnmarshalText(4 MB) took a decimal unit")
	}
}
