package replication

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

func TestConfigureConn(t *testing.T) {
	tests := []struct {
		url         string
		wantTimeout time.Duration
		wantApp     string
	}{
		{"postgres://u@127.0.0.1:5432/db", connectTimeout, AppName},
		{"postgres://u@127.0.0.1:5432/db?connect_timeout=3&application_name=mine", 3 * time.Second, "mine"},
	}
	for _, tt := range tests {
		cfg, err := pgconn.ParseConfig(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		configureConn(cfg)
		if cfg.ConnectTimeout != tt.wantTimeout {
			t.Errorf("%s: ConnectTimeout = %s, want %s", tt.url, cfg.ConnectTimeout, tt.wantTimeout)
		}
		if got := cfg.RuntimeParams["application_name"]; got != tt.wantApp {
			t.Errorf("%s: application_name = %q, want %q", tt.url, got, tt.wantApp)
		}
	}
}

// TestStandbyRetriesWithinTwoSeconds: with jitter, a standby's wait between
// attempts stays under 2 s however many attempts it made.
func TestStandbyRetriesWithinTwoSeconds(t *testing.T) {
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: standbyRetryMax}
	for i := 0; i < 1000; i++ {
		if d := bo.Next(); d >= 2*time.Second {
			t.Fatalf("attempt %d waits %s", i+1, d)
		}
	}
}
