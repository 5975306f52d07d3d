package app

import (
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Observer hears what happened in the use cases that their callers are
// not told: what ran and how long it took, and what went wrong on the
// side without changing the answer. The adapters' observe package logs
// and counts it.
type Observer interface {
	// RunCall is one invoke or continue that ran, with the status the run
	// reached and how long the engine took.
	RunCall(status run.Status, took time.Duration)
	// FlowRefused is a call refused before its run because the flow's AI
	// nodes need the safety guard and it is not wired (ErrGuardNotWired):
	// the developer is told only to retry, the platform must know why.
	FlowRefused(workspaceID string, err error)
	// ContractUnavailable is a call refused because a store the invoke
	// contract needs (what: "concurrency slots", "daily invoke cap") did
	// not answer.
	ContractUnavailable(what string, err error)
	// SlotNotRenewed is a running call's concurrency slot whose lease
	// could not be renewed: the run goes on, and at worst the workspace
	// has one run more than its limit for the rest of it.
	SlotNotRenewed(workspaceID string, err error)
	// SlotNotReleased is a slot not given back; it runs out with its
	// lease.
	SlotNotReleased(err error)
	// DailyUnitNotGivenBack is a refused call's unit of the daily cap that
	// stays counted.
	DailyUnitNotGivenBack(workspaceID string, err error)
	// ReceiptsPurged is a round of the receipts' retention that deleted
	// some.
	ReceiptsPurged(deleted int64)
	// ReceiptPurgeFailed is a round of it that failed; the next tries
	// again.
	ReceiptPurgeFailed(err error)
	// StreamNotFinished is a streamed call whose end's fate could not be
	// stored (its receipt, or its run failed when the end never reached
	// the reader): the run stays stored as it ended, and its key answers
	// that from Redis alone.
	StreamNotFinished(workspaceID, runID string, err error)
	// ChatTurn is one handling of a chat turn, by its outcome (the
	// ChatTurn* constants): how often turns are answered, found answered
	// before, handed back to wait, or failed and retried.
	ChatTurn(outcome string)
	// ChatFailed is work on the chat runs that failed on the side, where
	// no turn's redelivery reports it (what: which work); it is tried
	// again.
	ChatFailed(what string, err error)
}

// nopObserver hears nothing.
type nopObserver struct{}

func (nopObserver) RunCall(run.Status, time.Duration)       {}
func (nopObserver) FlowRefused(string, error)               {}
func (nopObserver) ContractUnavailable(string, error)       {}
func (nopObserver) SlotNotRenewed(string, error)            {}
func (nopObserver) SlotNotReleased(error)                   {}
func (nopObserver) DailyUnitNotGivenBack(string, error)     {}
func (nopObserver) ReceiptsPurged(int64)                    {}
func (nopObserver) ReceiptPurgeFailed(error)                {}
func (nopObserver) StreamNotFinished(string, string, error) {}
func (nopObserver) ChatFailed(string, error)                {}
func (nopObserver) ChatTurn(string)                         {}
