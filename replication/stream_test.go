package replication

import (
	"context"
	"errors"
	"testing"
)

// TestRunNeedsInspect: a stream made without Deps.Inspect could never make
// a session; Run says so at once, as a fatal error, before it connects.
func TestRunNeedsInspect(t *testing.T) {
	s := NewStream(Config{URL: "postgres://relay@127.0.0.1:1/app"}, Deps{})
	err := s.Run(context.Background())
	if !errors.Is(err, errNoInspect) || !IsFatal(err) {
		t.Fatalf("Run = %v, want a fatal %v", err, errNoInspect)
	}
}

// TestNewStreamKeepsStats: the Stats handed over in Deps are the ones the
// stream reports into, so that metrics made before the stream read them.
func TestNewStreamKeepsStats(t *testing.T) {
	stats := new(Stats)
	s := NewStream(Config{URL: "postgres://relay@db1:5432,db2:5433/app"}, Deps{Stats: stats})
	if s.Stats() != stats {
		t.Fatal("Stream.Stats is not Deps.Stats")
	}
	if got := stats.Hosts(); len(got) != 2 || got[0] != "db1:5432" || got[1] != "db2:5433" {
		t.Fatalf("Hosts = %q, want [db1:5432 db2:5433]", got)
	}
}
