module github.com/parleyhq/parley/docs/examples

go 1.23

require github.com/parleyhq/parley/sdk/go v0.0.0

replace github.com/parleyhq/parley/sdk/go => ../../sdk/go
