module github.com/parleyhq/parley/services/flow-runner

go 1.26.0

require (
	github.com/expr-lang/expr v1.17.8
	github.com/parleyhq/parley/pkg v0.0.0
)

replace github.com/parleyhq/parley/pkg => ../../pkg
