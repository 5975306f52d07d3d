# syntax=docker/dockerfile:1
# Builds messaging on its own module (GOWORK=off): the module's go.mod replaces
# the shared pkg module with ../../pkg and the Go client's module with
# ../../sdk/go, so the build context is the repo root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY pkg/go.mod pkg/go.sum ./pkg/
COPY sdk/go/go.mod ./sdk/go/
COPY services/messaging/go.mod services/messaging/go.sum ./services/messaging/
RUN cd services/messaging && GOWORK=off go mod download
COPY pkg ./pkg
COPY sdk/go ./sdk/go
COPY services/messaging ./services/messaging
RUN cd services/messaging && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/messaging .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/messaging /usr/local/bin/messaging
EXPOSE 8081
ENTRYPOINT ["/usr/local/bin/messaging"]
