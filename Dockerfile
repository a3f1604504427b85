# Multi-stage build: a static anp2 binary (pure-Go SQLite, no cgo) on an
# empty base image, with the database on a volume.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/anp2 ./cmd/anp2 \
 && mkdir -p /out/data /out/tmp

FROM scratch
COPY --from=build /out/anp2 /anp2
COPY --from=build --chown=65534:65534 /out/data /data
# SQLite sorts index rebuilds in temporary files (SPEC §2); scratch has no /tmp.
COPY --from=build --chown=65534:65534 /out/tmp /tmp
USER 65534:65534
VOLUME /data
EXPOSE 8080
ENV ANP2_ADDR=0.0.0.0:8080 ANP2_DB=/data/anp2.db
ENTRYPOINT ["/anp2"]
CMD ["serve"]
