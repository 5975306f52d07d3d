module github.com/parleyhq/parley/services/flow-runner

go 1.26.0

require (
	github.com/dop251/goja v0.0.0-20260917113740-793a2a65c13b
	github.com/expr-lang/expr v1.17.8
	github.com/parleyhq/parley/pkg v0.0.0
)

require (
	github.com/dlclark/regexp2/v2 v2.5.2 // indirect
	github.com/go-sourcemap/sourcemap v2.1.3+incompatible // indirect
	github.com/google/pprof v0.0.0-20230207041349-798e818bf904 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/parleyhq/parley/pkg => ../../pkg
