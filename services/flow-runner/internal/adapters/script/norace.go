//go:build !race

package script

// raceHeadroom is 0 without the race detector (see race.go).
func raceHeadroom(uint64) uint64 { return 0 }

// workerEnv is a worker's environment, before TZ (see startWorker):
// empty.
var workerEnv = []string{}
