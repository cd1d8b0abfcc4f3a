package relay

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/router"
)

// startConfig is a Config Run can build everything from without a
// service: JSON values (no registry), a broker nobody listens on.
func startConfig(t *testing.T) *Config {
	t.Helper()
	return &Config{PGURL: "postgres://u@127.0.0.1:1/db", Slot: "s", Publication: "p",
		Tables:       []decoder.Table{{Name: "public.outbox", Columns: decoder.DefaultColumns()}},
		KafkaBrokers: []string{"127.0.0.1:1"}, TopicTemplate: router.DefaultTemplate, DLQTopic: "outbox.dlq", OnInvalid: "dlq",
		MetricsAddr: "127.0.0.1:0", LogLevel: "error", MaxInFlightEvents: 100, MaxInFlightBytes: 1 << 20, MaxRecordBytes: 1 << 20,
		KafkaBatchBytes: 1 << 20, KafkaCompression: "none", TxnInterval: time.Second, TxnMaxEvents: 100, TxnTimeout: time.Minute,
		StatusInterval: time.Second, ReadTimeout: 3 * time.Second, ShutdownTimeout: time.Second,
		ValueFormat: recordpkg.ValueJSON, KeyFormat: recordpkg.KeyString, CheckpointTopic: "cdc-relay.checkpoints"}
}

// TestRunStartErrors: Run, called in-process, returns a *StartError naming
// what kept the relay from starting (the command exits 2 on it) and
// leaves nothing running.
func TestRunStartErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"schemas dir", func(c *Config) { c.SchemasDir = filepath.Join(t.TempDir(), "missing") }, "missing"},
		{"metrics address", func(c *Config) { c.MetricsAddr = busy.Addr().String() }, "--metrics-addr: cannot listen on " + busy.Addr().String()},
		{"initial replay without its engine", func(c *Config) { c.InitialReplay = true }, "--initial-replay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := startConfig(t)
			tc.edit(cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Run(ctx, cfg, Options{Getenv: func(string) string { return "" }})
			var start *StartError
			if !errors.As(err, &start) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want a *StartError saying %q", err, tc.want)
			}
		})
	}
}
