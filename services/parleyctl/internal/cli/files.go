package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/parleyhq/parley/pkg/bytesize"
)

// maxFile bounds a file a command sends: one call is one NATS message,
// 1 MiB by default, and no service takes a larger document (a flow's is
// 1 MiB, a knowledge document's Markdown 512 KiB).
const maxFile = bytesize.MiB

// readFile reads the file an operator named for command, at most maxFile:
// a larger file, or one that never ends (--file /dev/zero), is refused at
// once in one line instead of read until memory runs out.
func readFile(command, name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(maxFile)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	if len(b) > int(maxFile) {
		return nil, fmt.Errorf("%s: %s is over %s, more than one call carries", command, name, maxFile)
	}
	return b, nil
}
