package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestUnknownEnv: a CDC_RELAY_ variable no setting reads is named with the
// nearest setting's; settings, their _FILE, Kubernetes' service variables
// for a Service named cdc-relay and other names are known.
func TestUnknownEnv(t *testing.T) {
	tests := []struct {
		name string
		want string // "" means known
	}{
		{"CDC_RELAY_KAFKA_BROKER", "unknown environment variable CDC_RELAY_KAFKA_BROKER: no setting reads it; did you mean CDC_RELAY_KAFKA_BROKERS (--kafka-brokers)?"},
		{"CDC_RELAY_KAFKA_BROKER_FILE", "did you mean CDC_RELAY_KAFKA_BROKERS_FILE (--kafka-brokers)?"},
		{"CDC_RELAY_PGURL", "did you mean CDC_RELAY_PG_URL (--pg-url)?"},
		{"CDC_RELAY_pg_url", "did you mean CDC_RELAY_PG_URL (--pg-url)?"},
		{"CDC_RELAY_SINCE", "--since is a command-line flag of cdc-relay replay, cdc-relay tail, cdc-relay dlq redrive and cdc-relay dlq retire, never read from the environment"},
		{"CDC_RELAY_ACCEPT_GAP", "--accept-gap is a command-line flag of cdc-relay slot recreate"},
		{"CDC_RELAY_XYZZY_PLUGH", "no setting reads it (cdc-relay run --help lists each setting's env name)"},
		{"CDC_RELAY_KAFKA_BROKERS", ""},
		{"CDC_RELAY_KAFKA_BROKERS_FILE", ""},
		{"CDC_RELAY_PG_URL_FILE", ""},
		{"CDC_RELAY_CONFIG", ""},
		{"CDC_RELAY_GROUP", ""},
		{"CDC_RELAY_AGGREGATE_TYPES", ""},
		{"CDC_RELAY_SERVICE_HOST", ""},
		{"CDC_RELAY_SERVICE_PORT", ""},
		{"CDC_RELAY_SERVICE_PORT_METRICS", ""},
		{"CDC_RELAY_PORT", ""},
		{"CDC_RELAY_PORT_9187_TCP", ""},
		{"CDC_RELAY_PORT_9187_TCP_ADDR", ""},
		{"CDC_RELAY_PORT_9187_TCP_PORT", ""},
		{"CDC_RELAY_PORT_9187_TCP_PROTO", ""},
		{"CDC_RELAY_", ""},
		{"PATH", ""},
		{"OTEL_SERVICE_NAME", ""},
	}
	for _, tc := range tests {
		msg, unknown := Relay.UnknownEnv(tc.name, "cdc-relay run")
		if tc.want == "" {
			if unknown {
				t.Errorf("%s: %q, want known", tc.name, msg)
			}
			continue
		}
		if !unknown || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q (unknown %v), want %q", tc.name, msg, unknown, tc.want)
		}
	}
}

// TestWarnUnknownEnv: one WARN per unknown name, without its value.
func TestWarnUnknownEnv(t *testing.T) {
	var out bytes.Buffer
	Relay.WarnUnknownEnv([]string{"CDC_RELAY_SLOT", "CDC_RELAY_KAFKA_BROKER", "CDC_RELAY_KAFKA_BROKER", "CDC_RELAY_SERVICE_HOST", "HOME"}, "cdc-relay status", slog.New(slog.NewTextHandler(&out, nil)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "env=CDC_RELAY_KAFKA_BROKER") {
		t.Fatalf("warnings:\n%s", out.String())
	}
	Relay.WarnUnknownEnv([]string{"CDC_RELAY_X"}, "", nil) // no logger: nothing, no panic
}
