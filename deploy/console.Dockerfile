# syntax=docker/dockerfile:1
# Builds console on its own module (GOWORK=off): the module's go.mod replaces
# the shared pkg module with ../../pkg and the Go client's module with
# ../../sdk/go, so the build context is the repo root.
# The console's pages, styles and vendored scripts are embedded in the binary,
# so the image needs nothing beside it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY pkg/go.mod pkg/go.sum ./pkg/
COPY sdk/go/go.mod ./sdk/go/
COPY services/console/go.mod services/console/go.sum ./services/console/
RUN cd services/console && GOWORK=off go mod download
COPY pkg ./pkg
COPY sdk/go ./sdk/go
COPY services/console ./services/console
RUN cd services/console && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/console .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/console /usr/local/bin/console
EXPOSE 8084
ENTRYPOINT ["/usr/local/bin/console"]
