package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheck is `cdc-relay healthcheck`: it asks the running relay's
// /healthz, for images without a shell or curl. It is liveness, so it
// passes while /readyz answers 503 (standby, waiting, degraded): a relay
// waiting for Kafka or a promotion recovers by itself, a restart would not
// help.
func healthcheck(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("cdc-relay healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("metrics-addr", "", "address the relay serves /healthz on (env CDC_RELAY_METRICS_ADDR, default :9187)")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	if *addr == "" {
		*addr = getenv(EnvName("metrics-addr"))
	}
	if *addr == "" {
		*addr = ":9187"
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --metrics-addr %q is not [host]:port\n", *addr)
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
