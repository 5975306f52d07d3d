// Package bytesize reads and writes sizes the way Parley's settings and
// documented limits give them: a setting reads "1MiB", "512 KiB" or
// "65536" (bytes), and a limit is written "1 MiB", "64 KiB" or
// "1000 bytes" (docs/operations.md "Configuration").
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. As a setting it is read with UnmarshalText.
type Size int64

// Binary units, the only ones read: "MB" would leave open whether a
// million bytes or 2^20 was meant.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
)

var units = []struct {
	suffix string
	size   Size
}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"B", 1}}

// Parse reads a whole, non-negative number of bytes, KiB, MiB or GiB, with
// or without a space before the unit.
func Parse(s string) (Size, error) {
	text := strings.TrimSpace(s)
	unit := Size(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(text, u.suffix); ok {
			text, unit = strings.TrimSpace(n), u.size
			break
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/int64(unit) {
		return 0, fmt.Errorf("%q is not a size: want a whole number of bytes, KiB, MiB or GiB (such as 1MiB)", s)
	}
	return Size(n) * unit, nil
}

// UnmarshalText reads a setting's value with Parse.
func (s *Size) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// String writes the size the way limits are documented: in the largest
// binary unit it is a whole number of, else in bytes.
func (s Size) String() string {
	for _, u := range units[:3] {
		if s >= u.size && s%u.size == 0 {
			return fmt.Sprintf("%d %s", s/u.size, u.suffix)
		}
	}
	return fmt.Sprintf("%d bytes", int64(s))
}
