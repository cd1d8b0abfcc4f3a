package main

// The version matrix: the core scenarios against every other supported
// PostgreSQL major (13, 14, 16, 17, 18, from Maven Central; 15 is the
// harness's own). Each major gets one cluster, started when its subtests
// begin and stopped when they end; the majors run in parallel (as many at
// a time as -parallel allows), and the one subtest that stops Kafka stops a
// broker of its own.

import (
	"context"
	"fmt"
	"testing"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// matrixVersions are the majors TestMatrix runs, besides the harness's 15.
var matrixVersions = []int{13, 14, 16, 17, 18}

// startTarget starts a cluster of the given major with a database for the
// tests, stopped at cleanup. It fails, never skips, when the server is
// missing (scripts/setup.sh installs it).
func startTarget(t *testing.T, version int, settings map[string]string) pgTarget {
	t.Helper()
	testtier.Need(t)
	all := map[string]string{"wal_sender_timeout": "10s"}
	for k, v := range settings {
		all[k] = v
	}
	c, err := pgtest.Start(pgtest.Options{Version: version, Settings: all})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("PostgreSQL %d log tail:\n%s", version, c.LogTail(3000))
		}
		c.Close()
	})
	url, err := c.CreateDatabase(context.Background(), testDB)
	if err != nil {
		t.Fatal(err)
	}
	return pgTarget{cluster: c, db: testDB, url: url}
}

// TestMatrix runs end to end, interleaved transactions with a kill -9, idle
// WAL confirmation and invalid events on every other major.
func TestMatrix(t *testing.T) {
	t.Parallel()
	for _, v := range matrixVersions {
		t.Run(fmt.Sprintf("PG%d", v), func(t *testing.T) {
			t.Parallel()
			target := startTarget(t, v, nil)
			t.Run("EndToEnd", func(t *testing.T) { testEndToEnd(t, newFixtureOn(t, target, "")) })
			t.Run("InterleavedKillRestart", func(t *testing.T) {
				f := newFixtureOn(t, target, "")
				f.ownBroker()
				testInterleavedTransactionsKillRestart(t, f)
			})
			t.Run("IdleOutbox", func(t *testing.T) { testIdleOutboxBusyOtherTable(t, newFixtureOn(t, target, "")) })
			t.Run("InvalidEvents", func(t *testing.T) { testInvalidEventsGoToDLQ(t, newFixtureOn(t, target, ""), deliveries[0]) })
		})
	}
}
