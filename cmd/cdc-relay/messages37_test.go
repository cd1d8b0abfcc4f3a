package main

// Messages that tell the truth (issue 37, item 5): unit tests, no service.

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStatusMissingSlotConfigErrors: status checks its Kafka settings
// before it connects (exit 2), and takes none of run's other flags.
func TestStatusKafkaSettings(t *testing.T) {
	var out bytes.Buffer
	code := run([]string{"status", "--pg-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "k:9092", "--kafka-sasl-mechanism", "plain"}, env(nil), &out, &out)
	if code != exitConfig || !strings.Contains(out.String(), "--kafka-sasl-username") {
		t.Fatalf("status with SASL but no user = %d, want %d naming --kafka-sasl-username:\n%s", code, exitConfig, out.String())
	}
	out.Reset()
	if code := run([]string{"status", "--help"}, env(nil), &out, &out); code != exitOK || !strings.Contains(out.String(), "--checkpoint-topic") || !strings.Contains(out.String(), "CDC_RELAY_KAFKA_BROKERS") {
		t.Fatalf("status --help = %d:\n%s", code, out.String())
	}
}

// TestVersionHelp: version --help prints usage and exits 0, like every
// other command's --help; version still prints the version.
func TestVersionHelp(t *testing.T) {
	for _, h := range []string{"--help", "-h", "-help", "help"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"version", h}, env(nil), &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "Usage: cdc-relay version") || stderr.Len() != 0 {
			t.Errorf("version %s = %d, stdout %q, stderr %q", h, code, stdout.String(), stderr.String())
		}
	}
	var stdout bytes.Buffer
	if code := run([]string{"version"}, env(nil), &stdout, &stdout); code != exitOK || stdout.String() != "cdc-relay "+version+"\n" {
		t.Errorf("version = %d %q", code, stdout.String())
	}
}

// TestUnknownEnvWarns: an unknown CDC_RELAY_* variable is a WARN naming
// the nearest setting, in every command that reads settings, before a
// setting it was meant for is found missing; the variables Kubernetes
// injects for a Service named cdc-relay, and a setting's _FILE, stay
// silent. The value is never printed.
func TestUnknownEnvWarns(t *testing.T) {
	t.Setenv("CDC_RELAY_KAFKA_BROKER", "secret-broker:9092")
	t.Setenv("CDC_RELAY_SLOT_FILE", "/nonexistent/slot")
	t.Setenv("CDC_RELAY_SERVICE_HOST", "10.0.0.7")
	t.Setenv("CDC_RELAY_SERVICE_PORT", "9187")
	t.Setenv("CDC_RELAY_SERVICE_PORT_METRICS", "9187")
	t.Setenv("CDC_RELAY_PORT", "tcp://10.0.0.7:9187")
	t.Setenv("CDC_RELAY_PORT_9187_TCP", "tcp://10.0.0.7:9187")
	t.Setenv("CDC_RELAY_PORT_9187_TCP_ADDR", "10.0.0.7")
	t.Setenv("CDC_RELAY_PORT_9187_TCP_PORT", "9187")
	t.Setenv("CDC_RELAY_PORT_9187_TCP_PROTO", "tcp")
	t.Setenv("CDC_RELAY_PG_URL", "")
	t.Setenv("CDC_RELAY_PG_URL_FILE", "")
	t.Setenv("CDC_RELAY_KAFKA_BROKERS", "")
	t.Setenv("CDC_RELAY_CONFIG", "")
	commands := [][]string{
		{"run"}, {"check"}, {"status"}, {"replay", "--since", "1h"}, {"slot", "recreate", "--accept-gap"},
		{"tail"}, {"dlq", "stats"}, {"dlq", "redrive"}, {"schemas", "check"}, {"healthcheck", "--metrics-addr", "127.0.0.1:1"},
	}
	for _, args := range commands {
		var stdout, stderr bytes.Buffer
		code := run(args, os.Getenv, &stdout, &stderr)
		out := stderr.String()
		name := strings.Join(args, " ")
		if code == exitOK {
			t.Errorf("%s: exit 0 without settings:\n%s", name, out)
		}
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "unknown environment variable CDC_RELAY_KAFKA_BROKER:") ||
			!strings.Contains(out, "did you mean CDC_RELAY_KAFKA_BROKERS (--kafka-brokers)?") {
			t.Errorf("%s: no WARN naming CDC_RELAY_KAFKA_BROKERS:\n%s", name, out)
		}
		if strings.Contains(out, "secret-broker") {
			t.Errorf("%s: the WARN prints the value:\n%s", name, out)
		}
		for _, silent := range []string{"CDC_RELAY_SERVICE_", "CDC_RELAY_PORT", "CDC_RELAY_SLOT_FILE"} {
			if strings.Contains(out, "env="+silent) {
				t.Errorf("%s: warned of %s:\n%s", name, silent, out)
			}
		}
	}
	// version and help read no settings.
	var out bytes.Buffer
	if run([]string{"version"}, os.Getenv, &out, &out); strings.Contains(out.String(), "WARN") {
		t.Errorf("version warned:\n%s", out.String())
	}
}

// TestKafkaDownAtStartMessage: with Kafka unreachable at start, the relay
// says that it waits for Kafka and the checkpoint topic before it streams
// (the guard reads the checkpoint before the slot is created or read:
// TestCheckpointUnreadable), not that it retries "when events arrive".
// PostgreSQL is unreachable too: no service is started.
func TestKafkaDownAtStartMessage(t *testing.T) {
	t.Parallel()
	r := startRelay(t, []string{"run", "--pg-url", "postgres://u@127.0.0.1:1/db?connect_timeout=1", "--kafka-brokers", "127.0.0.1:1",
		"--value-format", "json", "--checkpoint-topic", "ckpt-waits", "--log-level", "info"})
	want := "the relay waits for Kafka and the checkpoint topic (--checkpoint-topic) before it streams; nothing is read from the slot meanwhile"
	waitFor(t, 30*time.Second, "the kafka-down message", func() bool { return strings.Contains(r.Output(), want) })
	out := r.Output()
	if !strings.Contains(out, "checkpoint_topic=ckpt-waits") || !strings.Contains(out, "kafka_brokers=[127.0.0.1:1]") || strings.Contains(out, "when events arrive") {
		t.Fatalf("the kafka-down line lacks its fields:\n%s", tailString(out, 3000))
	}
	if code := r.terminate(); code != exitOK {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, tailString(r.Output(), 3000))
	}
}
