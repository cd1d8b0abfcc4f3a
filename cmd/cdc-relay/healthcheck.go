package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/config"
)

// healthcheck is `cdc-relay healthcheck`: it asks the running relay's
// /healthz, for images without a shell or curl. It is liveness, so it
// passes while /readyz answers 503 (standby, waiting, degraded): a relay
// waiting for Kafka or a promotion recovers by itself, a restart would not
// help.
func healthcheck(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	v, code, ok := loadValues(config.Healthcheck, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	addr := config.MetricsAddr.From(v)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --metrics-addr %q is not [host]:port\n", addr)
		return exitConfig
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	client := http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get("http://" + net.JoinHostPort(host, port) + "/healthz")
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: unhealthy: %v\n", err)
		return exitFailed
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "cdc-relay: unhealthy: /healthz answered %d\n", resp.StatusCode)
		return exitFailed
	}
	return exitOK
}
