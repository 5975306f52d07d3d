# syntax=docker/dockerfile:1
# Builds parleyctl on its own module (GOWORK=off): the module's go.mod replaces
# the shared pkg module with ../../pkg and the Go client's module with
# ../../sdk/go, so the build context is the repo root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY pkg/go.mod pkg/go.sum ./pkg/
COPY sdk/go/go.mod ./sdk/go/
COPY services/parleyctl/go.mod services/parleyctl/go.sum ./services/parleyctl/
RUN cd services/parleyctl && GOWORK=off go mod download
COPY pkg ./pkg
COPY sdk/go ./sdk/go
COPY services/parleyctl ./services/parleyctl
RUN cd services/parleyctl && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/parleyctl .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/parleyctl /usr/local/bin/parleyctl
ENTRYPOINT ["/usr/local/bin/parleyctl"]
