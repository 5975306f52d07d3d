//go:build race

package script

// raceHeadroom is what the race detector's runtime maps beside a Go heap
// that grows by limit, which RLIMIT_DATA counts: shadow memory of two and
// a half times each 64 MiB heap arena, mapped an arena at a time. A worker
// built with -race (as in the tests) gets it on top of its cap, so that
// the cap bounds what the script uses about as it does in production.
func raceHeadroom(limit uint64) uint64 {
	const arena = 64 << 20
	return (limit/arena + 2) * (arena * 5 / 2)
}

// workerEnv is a worker's environment, before TZ (see startWorker): a
// worker built with -race exits without the race detector's second of
// waiting for late reports (its reports are written as races happen, and
// fail the script).
var workerEnv = []string{"GORACE=atexit_sleep_ms=0"}
