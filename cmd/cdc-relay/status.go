package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/config"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
	slotpkg "github.com/cdc-relay/cdc-relay/slot"
)

// status is `cdc-relay status`: the slot's row from the catalog (never the
// outbox table), with lag in bytes.
func status(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	v, code, ok := loadValues(config.Status, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	asJSON := config.FlagJSON.From(v)
	slot := config.Slot.From(v)
	ckpt, err := statusCheckpointConfig(v)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return exitConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, config.PGURL.From(v))
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: connect: %s\n", Redact(err.Error()))
		return exitFailed
	}
	defer conn.Close(context.Background())
	st, err := slotpkg.Query(ctx, conn, slot)
	if errors.Is(err, slotpkg.ErrNoSlot) {
		// What run does with a missing slot depends on the checkpoint
		// topic: a first start, or exit 3.
		err = fmt.Errorf("%w: %s", err, slotpkg.Verdict(config.PGURL.From(v), ckpt, slot, replication.SlotInfo{}, false))
	}
	if errors.Is(err, slotpkg.ErrNoSlot) && asJSON {
		// Still JSON on stdout, for scripts; the exit code says it too.
		slotpkg.PrintJSON(stdout, struct {
			Slot   string `json:"slot"`
			Exists bool   `json:"exists"`
			Error  string `json:"error"`
		}{slot, false, err.Error()})
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitFailed
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitFailed
	}
	if asJSON {
		slotpkg.PrintJSON(stdout, st)
		return exitOK
	}
	slotpkg.Print(stdout, st)
	if st.WALStatus == "lost" {
		fmt.Fprintln(stdout, "WARNING: the slot is lost: PostgreSQL removed WAL it still needed, events may have been lost")
		fmt.Fprintln(stdout, slotpkg.Verdict(config.PGURL.From(v), ckpt, slot, replication.SlotInfo{WALStatus: st.WALStatus}, true))
		return exitFailed
	}
	return exitOK
}

// statusCheckpointConfig is the part of run's configuration that reads the
// checkpoint: the brokers, their TLS and SASL, --checkpoint-topic and
// --relay-id, or under --rabbitmq-url the checkpoint streams. Without
// either broker it is nil: status then cannot tell a first start from a
// dropped slot, and says so.
func statusCheckpointConfig(v *config.Values) (*Config, error) {
	c := &Config{KafkaBrokers: config.KafkaBrokers.Items(v), CheckpointTopic: config.CheckpointTopic.From(v), RelayID: config.RelayID.From(v), Slot: config.Slot.From(v)}
	if config.RabbitMQURL.From(v) != "" {
		if len(c.KafkaBrokers) > 0 {
			return nil, cfgErr("rabbitmq-url", "is set and so is --kafka-brokers: set exactly one of them")
		}
		if err := relaypkg.ToolBroker(c, v); err != nil {
			return nil, err
		}
		c.RabbitMQCheckpointStream = config.RabbitMQCheckpointStream.From(v)
		return c, nil
	}
	if len(c.KafkaBrokers) == 0 {
		return nil, nil
	}
	if err := relaypkg.ToolBroker(c, v); err != nil {
		return nil, err
	}
	if err := kafkaSecurity(c, v); err != nil {
		return nil, err
	}
	return c, nil
}
