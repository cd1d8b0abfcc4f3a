package relay

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/checkpoint"
)

// NewGuard is the relay's checkpoint for cfg, reached with kopts (the
// Kafka TLS and SASL: CheckedKafkaSecurity), or under RabbitMQ in its
// checkpoint streams; readOnly creates nothing (check). The
// caller closes it when done.
func NewGuard(cfg *Config, kopts []kgo.Opt, log *slog.Logger, readOnly bool) *checkpoint.Guard {
	var store checkpoint.Backend = checkpoint.NewStore(cfg.KafkaBrokers, kopts, cfg.CheckpointTopic)
	if cfg.RabbitMQ() {
		store = newRabbitCheckpoints(cfg)
	}
	return checkpoint.NewGuard(checkpoint.Config{Store: store, RelayID: cfg.RelayID,
		Slot: cfg.Slot, Publication: cfg.Publication, Tables: TableNames(cfg.Tables), Version: Version, RecreateInvalidated: cfg.RecreateLostSlot,
		ExactlyOnce: cfg.ExactlyOnce, ReadOnly: readOnly, InitialReplay: cfg.InitialReplay && !readOnly, Logger: log})
}

// checkInitialReplay refuses --initial-replay for a table without a
// created_at column of a timestamp type: its rows cannot be chosen by
// creation time.
func checkInitialReplay(cfg *Config, in *Inspection) error {
	if !cfg.InitialReplay {
		return nil
	}
	for i, t := range in.Tables {
		name := cfg.Tables[i].Columns.CreatedAt
		col, ok := t.Columns[name]
		if name == "" || !ok || (col.BaseOID != OIDTimestamptz && col.BaseOID != OIDTimestamp) {
			return ConfigErr("initial-replay", "table %s has no created_at column of type timestamptz or timestamp (%q; YAML columns: created_at: names it): the initial replay chooses the rows created before the slot by it; add one, or remove --initial-replay and publish the rows with cdc-relay replay --from-id", t.Name, name)
		}
	}
	return nil
}
