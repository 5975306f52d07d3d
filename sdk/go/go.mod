module github.com/parleyhq/parley/sdk/go

go 1.23
