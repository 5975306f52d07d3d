package script

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// TestMain lets the Sandbox start this test binary as its workers, as the
// flow-runner starts its own binary, and as the stand-ins of workers that
// misbehave (standIn).
func TestMain(m *testing.M) {
	RunWorkerIfAsked()
	standIn()
	os.Exit(m.Run())
}

// The command words of the stand-ins: a worker that writes its stdout
// without end, one that fills its stderr and dies, and one that never
// says it is ready.
const (
	floodStdout = "-flood-stdout"
	dieLoudly   = "-die-loudly"
	neverReady  = "-never-ready"
)

// standIn runs this process as a misbehaving worker when asked, once
// ready: what a worker does not do (it runs the Sandbox's code, not the
// script's), but what the Sandbox must survive all the same.
func standIn() {
	if len(os.Args) != 2 {
		return
	}
	switch os.Args[1] {
	case floodStdout, dieLoudly:
	case neverReady:
		// Until killed, or until the test process is gone.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(1)
	default:
		return
	}
	if _, err := os.Stdout.WriteString(workerReady); err != nil {
		os.Exit(1)
	}
	switch os.Args[1] {
	case floodStdout:
		line := []byte(strings.Repeat("x", 4096))
		for {
			if _, err := os.Stdout.Write(line); err != nil {
				os.Exit(1)
			}
		}
	case dieLoudly:
		fmt.Fprintln(os.Stderr, "fatal error: the stand-in dies")
		for range 1024 {
			fmt.Fprintln(os.Stderr, strings.Repeat("y", 1024))
		}
		os.Exit(3)
	}
}

// standInSandbox is a Sandbox whose workers are the stand-in named by its
// command word.
func standInSandbox(t *testing.T, word string) *Sandbox {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t, Limits{})
	s.worker = []string{self, word}
	return s
}
