package main

// Exactly-once delivery (--delivery exactly-once) against the real
// services: a zombie active fenced by the standby that took its slot, the
// shipped two-replica setup running without fencing, and a 1M-row
// PostgreSQL transaction delivered once within the memory bound. What
// Kafka holds is read by franz-go consumers with read_committed (what an
// exactly-once consumer sees) and read_uncommitted (what was written at
// all), not by the relay's code.

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestDeliverySettings: --delivery takes at-least-once (the default) or
// exactly-once and nothing else (exit 2 naming the field); the transaction
// settings default to 100ms, 10000 and 60s, as issue 18 and the README say.
func TestDeliverySettings(t *testing.T) {
	c, err := LoadConfig(required, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ExactlyOnce || c.TransactionalID != "" || c.TxnInterval != 100*time.Millisecond || c.TxnMaxEvents != 10000 || c.TxnTimeout != 60*time.Second {
		t.Fatalf("defaults: exactly-once %v, transactional id %q, txn-interval %s, txn-max-events %d, txn-timeout %s; want false, \"\", 100ms, 10000, 1m0s",
			c.ExactlyOnce, c.TransactionalID, c.TxnInterval, c.TxnMaxEvents, c.TxnTimeout)
	}
	c, err = LoadConfig(append(append([]string{}, required...), "--delivery", "exactly-once", "--transactional-id", "orders-relay"), env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.ExactlyOnce || c.TransactionalID != "orders-relay" {
		t.Fatalf("--delivery exactly-once --transactional-id orders-relay: exactly-once %v, transactional id %q", c.ExactlyOnce, c.TransactionalID)
	}
	c, err = LoadConfig(required, env(map[string]string{"CDC_RELAY_DELIVERY": "exactly-once", "CDC_RELAY_TXN_MAX_EVENTS": "500"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.ExactlyOnce || c.TxnMaxEvents != 500 {
		t.Fatalf("CDC_RELAY_DELIVERY=exactly-once CDC_RELAY_TXN_MAX_EVENTS=500: exactly-once %v, txn-max-events %d", c.ExactlyOnce, c.TxnMaxEvents)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantKey string
	}{
		{"exactly_once", []string{"--delivery", "exactly_once"}, nil, "--delivery"},
		{"at-most-once", []string{"--delivery", "at-most-once"}, nil, "--delivery"},
		{"capitalised", []string{"--delivery", "Exactly-Once"}, nil, "--delivery"},
		{"env", nil, map[string]string{"CDC_RELAY_DELIVERY": "transactional"}, "--delivery"},
		{"txn-interval zero", []string{"--txn-interval", "0s"}, nil, "--txn-interval"},
		{"txn-max-events zero", []string{"--txn-max-events", "0"}, nil, "--txn-max-events"},
		{"txn-timeout over an hour", []string{"--txn-timeout", "2h"}, nil, "--txn-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(append(append([]string{"run"}, required...), tc.args...), env(tc.env), &bytes.Buffer{}, &stderr)
			if code != exitConfig {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, exitConfig, stderr.String())
			}
			if out := stderr.String(); !strings.Contains(out, tc.wantKey) {
				t.Fatalf("stderr does not name %s: %s", tc.wantKey, out)
			}
		})
	}
}
