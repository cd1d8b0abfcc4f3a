# syntax=docker/dockerfile:1
# Multi-stage build: a static cdc-relay binary on a distroless, non-root base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/cdc-relay ./cmd/cdc-relay

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cdc-relay /usr/local/bin/cdc-relay
COPY testdata/schemas /etc/cdc-relay/schemas
USER nonroot:nonroot
EXPOSE 9187
# distroless has no shell or curl: the relay checks its own /healthz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/cdc-relay", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/cdc-relay"]
CMD ["run"]
