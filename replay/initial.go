package replay

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// Initial is replication.Deps.InitialReplay (relay.Options.InitialReplay) under --initial-replay
// (nil without it): it publishes through the replay path (the engine of
// cdc-relay replay, with run's settings) the rows of every configured table
// created before until, and returns once Kafka acknowledged all of them.
// A setting that does not fit the tables halts the relay (exit 2); any
// other failure is retried with the next connection, which replays again.
func Initial(cfg *relay.Config, log *slog.Logger) func(ctx context.Context, until time.Time) error {
	if !cfg.InitialReplay {
		return nil
	}
	return func(ctx context.Context, until time.Time) error {
		stdout, stderr := &tailWriter{max: 4096}, &tailWriter{max: 4096}
		r := &replayer{cfg: cfg, rf: Flags{Since: replication.ReplaySince, Until: until.UTC().Format(time.RFC3339Nano)},
			log: log, stdout: stdout, stderr: stderr}
		code := r.run(ctx)
		text := strings.TrimSpace(stderr.String())
		text = strings.TrimPrefix(strings.TrimPrefix(text, "cdc-relay: "), "replay failed: ")
		switch code {
		case relay.ExitOK:
			for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				if strings.HasPrefix(line, "replayed ") {
					log.Info("initial replay: "+line, "until", until.Format(time.RFC3339Nano))
				}
			}
			return nil
		case relay.ExitConfig:
			return replication.Fatal(relay.ConfigErr("initial-replay", "%s", text))
		}
		return fmt.Errorf("initial replay: %s", text)
	}
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if over := w.buf.Len() - w.max; over > 0 {
		w.buf.Next(over)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
