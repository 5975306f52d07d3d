# syntax=docker/dockerfile:1
# Builds webhook-dispatcher on its own module (GOWORK=off): the module's go.mod replaces
# the shared pkg module with ../../pkg and the Go client's module with
# ../../sdk/go, so the build context is the repo root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY pkg/go.mod pkg/go.sum ./pkg/
COPY sdk/go/go.mod ./sdk/go/
COPY services/webhook-dispatcher/go.mod services/webhook-dispatcher/go.sum ./services/webhook-dispatcher/
RUN cd services/webhook-dispatcher && GOWORK=off go mod download
COPY pkg ./pkg
COPY sdk/go ./sdk/go
COPY services/webhook-dispatcher ./services/webhook-dispatcher
RUN cd services/webhook-dispatcher && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/webhook-dispatcher .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/webhook-dispatcher /usr/local/bin/webhook-dispatcher
EXPOSE 8082
ENTRYPOINT ["/usr/local/bin/webhook-dispatcher"]
