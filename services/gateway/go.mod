module github.com/parleyhq/parley/services/gateway

go 1.26.0

require github.com/parleyhq/parley/pkg v0.0.0

replace github.com/parleyhq/parley/pkg => ../../pkg
