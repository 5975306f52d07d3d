package cli

import "io"

// SetOperatorStdin makes operator create read r as its stdin until the
// returned restore runs; tests that use it do not run in parallel.
func SetOperatorStdin(r io.Reader) (restore func()) {
	old := operatorStdin
	operatorStdin = r
	return func() { operatorStdin = old }
}
