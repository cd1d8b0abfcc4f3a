package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// TestMixedGroupRollingUpgrade runs the consumer group of a rolling
// upgrade: members of the inbox before franz-go (testdata/oldinbox, a
// kafka-go Reader with the group balancers, range and roundrobin, and the
// settings the old inbox used, applying events with the same mark) and a
// new Consumer share one group and one processed_messages. First an old
// member leads and the new one joins it (the kafka-go leader must read the
// new member's metadata); then the first old member stops, the new one
// leads, and a second old member joins (the kafka-go member must take the
// franz-go leader's assignment). Each time the group settles on range with
// partitions on both members, and nobody logs INCONSISTENT_GROUP_PROTOCOL
// or a member it cannot read. Every event is applied exactly once across
// them, and both kinds of member applied some.
func TestMixedGroupRollingUpgrade(t *testing.T) {
	t.Parallel()
	url := newDB(t)
	execSQL(t, url, "CREATE TABLE effects (event_id text, instance text)")
	topic := "mix" + suffix()
	createTopic(t, topic, 3)
	group := "c_" + suffix()
	oldBin := buildOldInbox(t)
	recs := orderRecords(t, topic, 180, func(i int) string { return fmt.Sprintf("k%d", i) })
	for i := range recs {
		recs[i].partition = int32(i % 3)
	}
	adm := kadm.NewClient(kafkaClient(t))
	// settled waits until the group is stable with want members, each
	// holding at least one partition, on the range protocol.
	settled := func(what string, want int) {
		t.Helper()
		var last string
		relaytest.WaitFor(t, 90*time.Second, what, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			gs, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return false
			}
			g := gs[group]
			last = fmt.Sprintf("state %s, protocol %q, %d members", g.State, g.Protocol, len(g.Members))
			if g.State != "Stable" || g.Protocol != "range" || len(g.Members) != want {
				return false
			}
			for _, m := range g.Members {
				a, ok := m.Assigned.AsConsumer()
				if !ok || len(a.Topics) == 0 {
					return false
				}
			}
			return true
		})
		t.Logf("%s: %s", what, last)
	}
	applied := func(n int64) func() bool {
		return func() bool {
			got, _ := queryInt(url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", group)
			c := committed(t, group, topic)
			return got == n && c[0]+c[1]+c[2] == n
		}
	}
	oldArgs := func(instance string) []string {
		return []string{"--brokers", broker.Addr(), "--group", group, "--topic", topic, "--pg-url", url,
			"--instance", instance, "--session-timeout", "6s"}
	}

	old1 := relaytest.Start(t, oldBin, oldArgs("old-1"), relaytest.Options{Name: "oldinbox-1", TailBytes: 3000})
	produce(t, topic, recs[:60])
	waitFor(t, 90*time.Second, "the old member applied the first 60", applied(60))

	logs := &relaytest.LogBuffer{}
	cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, 'new')", ev.ID)
		return err
	})
	cfg.Consumer, cfg.Logger = group, slog.New(slog.NewTextHandler(logs, nil))
	runConsumer(t, cfg)
	settled("the new member in the old member's group", 2)
	produce(t, topic, recs[60:120])
	waitFor(t, 120*time.Second, "the next 60 applied", applied(120))

	if code := old1.Terminate(); code != 0 {
		t.Errorf("the first old member exited %d", code)
	}
	settled("the new member alone", 1)
	old2 := relaytest.Start(t, oldBin, oldArgs("old-2"), relaytest.Options{Name: "oldinbox-2", TailBytes: 3000})
	settled("an old member in the new member's group", 2)
	produce(t, topic, recs[120:])
	waitFor(t, 120*time.Second, "every event applied", applied(180))

	if n := mustInt(t, url, "SELECT count(*) FROM effects"); n != 180 {
		t.Errorf("%d effects, want 180 (each event once)", n)
	}
	if n := mustInt(t, url, "SELECT count(DISTINCT event_id) FROM effects"); n != 180 {
		t.Errorf("%d distinct events applied, want 180", n)
	}
	for _, instance := range []string{"new", "old-2"} {
		if n := mustInt(t, url, "SELECT count(*) FROM effects WHERE instance = $1 AND event_id >= 'id-120'", instance); n == 0 {
			t.Errorf("%s applied none of the last 60 events: the group did not share them", instance)
		}
	}
	if n := mustInt(t, url, "SELECT count(*) FROM effects WHERE instance = 'new'"); n == 0 {
		t.Error("the new member applied nothing")
	}
	for name, out := range map[string]string{"old-1": old1.Output(), "old-2": old2.Output(), "new": logs.String()} {
		for _, bad := range []string{"INCONSISTENT_GROUP_PROTOCOL", "Inconsistent Group Protocol", "unable to read metadata for member"} {
			if strings.Contains(out, bad) {
				t.Errorf("the %s member logged %q", name, bad)
			}
		}
	}
}

// buildOldInbox builds testdata/oldinbox, a module of its own (kafka-go
// stays out of the project's dependencies), and returns the binary.
func buildOldInbox(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "oldinbox")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "testdata", "oldinbox")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/oldinbox: %v\n%s", err, out)
	}
	return bin
}
