package script

import (
	"fmt"
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
// without end, and one that fills its stderr and dies.
const (
	floodStdout = "-flood-stdout"
	dieLoudly   = "-die-loudly"
)

// standIn runs this process as a misbehaving worker when asked, once
// ready: what a worker does not do (it runs the Sandbox's code, not the
// script's), but what the Sandbox must survive all the same.
func standIn() {
	if len(os.Args) != 2 || (os.Args[1] != floodStdout && os.Args[1] != dieLoudly) {
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
