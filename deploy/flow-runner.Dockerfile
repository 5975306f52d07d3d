# syntax=docker/dockerfile:1
# Builds flow-runner on its own module (GOWORK=off): the module's go.mod replaces
# the shared pkg module with ../../pkg and the Go client's module with
# ../../sdk/go, so the build context is the repo root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY pkg/go.mod pkg/go.sum ./pkg/
COPY sdk/go/go.mod ./sdk/go/
COPY services/flow-runner/go.mod services/flow-runner/go.sum ./services/flow-runner/
RUN cd services/flow-runner && GOWORK=off go mod download
COPY pkg ./pkg
COPY sdk/go ./sdk/go
COPY services/flow-runner ./services/flow-runner
RUN cd services/flow-runner && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/flow-runner .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/flow-runner /usr/local/bin/flow-runner
EXPOSE 8083
ENTRYPOINT ["/usr/local/bin/flow-runner"]
