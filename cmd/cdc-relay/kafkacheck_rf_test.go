package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCheckCheckpointReplicasThreeBrokers: on a cluster of three brokers,
// check warns that a checkpoint topic with one replica can lose the
// checkpoint with a broker, and says nothing against one with three. The
// test Kafka is a single node, so the three brokers are franz-go's kfake
// (the rest of check runs against the real PostgreSQL and registry).
func TestCheckCheckpointReplicasThreeBrokers(t *testing.T) {
	for _, tc := range []struct {
		rf   int16
		want string
		warn bool
	}{
		{1, "WARN  Kafka: checkpoint topic %s has replication factor 1 on a cluster of 3 brokers: losing a broker can lose the checkpoint", true},
		{3, "ok    Kafka: checkpoint topic %s has replication factor 3 on 3 brokers", false},
	} {
		t.Run(strings.Repeat("r", int(tc.rf)), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(3))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			f := newFixture(t, "")
			ckpt := f.topicPrefix + ".checkpoints"
			createTopicRF(t, c.ListenAddrs()[0], ckpt, tc.rf, map[string]string{"cleanup.policy": "compact"})
			args := withFlag(commandArgs("check", f.args()), "--kafka-brokers", strings.Join(c.ListenAddrs(), ","))
			args = append(args, "--checkpoint-topic", ckpt)
			_, out := runCommand(args)
			want := strings.ReplaceAll(tc.want, "%s", ckpt)
			if !strings.Contains(out, want) {
				t.Errorf("check output lacks\n%s\n---\n%s", want, out)
			}
			if !tc.warn && strings.Contains(out, "WARN  Kafka: checkpoint topic") {
				t.Errorf("check warns of a checkpoint topic with %d replicas:\n%s", tc.rf, out)
			}
		})
	}
}

// createTopicRF creates a one-partition topic with rf replicas and configs
// through an independent client (kadm) on the broker at addr.
func createTopicRF(t *testing.T, addr, name string, rf int16, configs map[string]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	values := map[string]*string{}
	for k, v := range configs {
		values[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, rf, values, name); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// withFlag sets flag's value in args, replacing it if it is there.
func withFlag(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == flag {
			out[i+1] = value
			return out
		}
	}
	return append(out, flag, value)
}
