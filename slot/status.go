package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// Status is one row of pg_replication_slots, as `cdc-relay status` prints it.
type Status struct {
	Slot string `json:"slot"`
	// Exists is true: a missing slot prints {"slot", "exists": false, "error"}.
	Exists            bool   `json:"exists"`
	Plugin            string `json:"plugin"`
	Database          string `json:"database"`
	Active            bool   `json:"active"`
	ActivePID         *int32 `json:"active_pid"`
	ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
	RestartLSN        string `json:"restart_lsn"`
	CurrentWALLSN     string `json:"current_wal_lsn"`
	LagBytes          int64  `json:"lag_bytes"`
	RetainedBytes     int64  `json:"retained_bytes"`
	WALStatus         string `json:"wal_status"`
	SafeWALSizeBytes  *int64 `json:"safe_wal_size_bytes"`
	// Failover is null before PostgreSQL 17, which has no failover slots.
	Failover *bool `json:"failover"`
}

// ErrNoSlot is Query's error for a slot that does not exist.
var ErrNoSlot = errors.New("no replication slot")

// Print writes st as `cdc-relay status` prints it, one field a line.
func Print(w io.Writer, st *Status) {
	pid := "-"
	if st.ActivePID != nil {
		pid = fmt.Sprint(*st.ActivePID)
	}
	safe := "unlimited (max_slot_wal_keep_size = -1)"
	if st.SafeWALSizeBytes != nil {
		safe = fmt.Sprintf("%d bytes", *st.SafeWALSizeBytes)
	}
	fmt.Fprintf(w, "slot                 %s (%s, database %s)\n", st.Slot, st.Plugin, st.Database)
	fmt.Fprintf(w, "active pid           %s\n", pid)
	fmt.Fprintf(w, "confirmed_flush_lsn  %s\n", st.ConfirmedFlushLSN)
	fmt.Fprintf(w, "restart_lsn          %s\n", st.RestartLSN)
	fmt.Fprintf(w, "current wal lsn      %s\n", st.CurrentWALLSN)
	fmt.Fprintf(w, "lag                  %d bytes (current WAL minus confirmed_flush_lsn)\n", st.LagBytes)
	fmt.Fprintf(w, "retained wal         %d bytes (current WAL minus restart_lsn)\n", st.RetainedBytes)
	fmt.Fprintf(w, "wal_status           %s\n", st.WALStatus)
	fmt.Fprintf(w, "safe_wal_size        %s\n", safe)
	switch {
	case st.Failover == nil:
		fmt.Fprintln(w, "failover             no (PostgreSQL 17+ only): the slot does not survive a promotion")
	case *st.Failover:
		fmt.Fprintln(w, "failover             yes: standbys with sync_replication_slots = on keep it")
	default:
		fmt.Fprintln(w, "failover             no: the slot does not survive a promotion (--slot-failover)")
	}
}

// PrintJSON writes v indented, as status --json prints.
func PrintJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// Query reads the row of slot from pg_replication_slots, with the lag
// and the retained WAL in bytes; ErrNoSlot (wrapped) when there is none.
func Query(ctx context.Context, conn *pgx.Conn, slot string) (*Status, error) {
	st := &Status{Slot: slot, Exists: true}
	var plugin, database, walStatus, confirmed, restart *string
	var lag, retained *int64
	err := conn.QueryRow(ctx, `SELECT plugin, database, active, active_pid,
			confirmed_flush_lsn::text, restart_lsn::text, w.lsn::text,
			pg_wal_lsn_diff(w.lsn, confirmed_flush_lsn)::bigint,
			pg_wal_lsn_diff(w.lsn, restart_lsn)::bigint,
			wal_status, safe_wal_size, (to_jsonb(s) ->> 'failover')::bool
		FROM pg_catalog.pg_replication_slots s,
			-- on a standby (in recovery) the WAL position is the replayed one
			(SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn) w
		WHERE slot_name = $1`, slot).
		Scan(&plugin, &database, &st.Active, &st.ActivePID, &confirmed, &restart, &st.CurrentWALLSN, &lag, &retained, &walStatus, &st.SafeWALSizeBytes, &st.Failover)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("--slot: %w %q in this cluster", ErrNoSlot, slot)
	}
	if err != nil {
		return nil, fmt.Errorf("read pg_replication_slots: %w", err)
	}
	st.Plugin, st.Database, st.WALStatus = strOrEmpty(plugin), strOrEmpty(database), strOrEmpty(walStatus)
	st.ConfirmedFlushLSN, st.RestartLSN = strOrEmpty(confirmed), strOrEmpty(restart)
	if lag != nil {
		st.LagBytes = *lag
	}
	if retained != nil {
		st.RetainedBytes = *retained
	}
	return st, nil
}

func strOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Verdict says what cdc-relay run does with a slot that is missing
// (exists false) or invalidated (lost): it asks the checkpoint guard, as run
// does at start, reading the checkpoint topic (or under RabbitMQ the
// checkpoint streams) and creating nothing.
func Verdict(pgURL string, cfg *relay.Config, slot string, info replication.SlotInfo, exists bool) string {
	if cfg == nil {
		return verdictText(slot, "", checkpoint.Kafka, 0, nil, exists, false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	topic, broker := cfg.CheckpointTopic, checkpoint.Kafka
	if cfg.RabbitMQ() {
		topic, broker = cfg.RabbitMQCheckpointStream+".*", checkpoint.RabbitMQ
	}
	sec, err := cfg.KafkaSettings().Build()
	if err != nil {
		return verdictText(slot, topic, broker, 0, fmt.Errorf("%w: --kafka-tls: %w", replication.ErrCheckpointUnavailable, err), exists, true)
	}
	rconn, err := replication.ConnectReplication(ctx, pgURL)
	if err != nil {
		return verdictText(slot, topic, broker, 0, fmt.Errorf("%w: identify the server (a replication connection): %w", replication.ErrCheckpointUnavailable, err), exists, true)
	}
	defer rconn.Close(context.Background())
	server, err := replication.Identify(ctx, rconn)
	if err != nil {
		return verdictText(slot, topic, broker, 0, fmt.Errorf("%w: %w", replication.ErrCheckpointUnavailable, err), exists, true)
	}
	g := relay.NewGuard(cfg, sec.Opts, slog.New(slog.DiscardHandler), true)
	defer g.Close()
	verdict, _, err := g.Decide(ctx, replication.GuardInput{Server: server, Slot: slot, Info: info, Exists: exists, First: true,
		History: func(ctx context.Context) ([]replication.TimelineSwitch, error) {
			return replication.TimelineHistory(ctx, rconn, server.Timeline)
		}})
	return verdictText(slot, topic, broker, verdict, err, exists, true)
}

// rabbitSettings follows the texts of a status given no broker: the
// settings that let it read the checkpoint under RabbitMQ.
const rabbitSettings = "; under RabbitMQ, set --rabbitmq-url (or CDC_RELAY_RABBITMQ_URL) with --rabbitmq-checkpoint-stream for status to read the checkpoint streams instead"

// verdictText is Verdict's sentence for the guard's verdict and error;
// topic names the checkpoint's place at broker (under RabbitMQ the
// streams' prefix and ".*"); read is false when status could not read the
// checkpoint as it has no broker's settings.
func verdictText(slot, topic string, broker checkpoint.Broker, verdict replication.Verdict, err error, lost, read bool) string {
	place := broker.Checkpoints()
	recreate := ""
	if lost {
		recreate = " (unless run has --recreate-lost-slot, which drops and recreates it, logs the gap at ERROR and records it in " + place + ")"
	}
	unknown := fmt.Sprintf("if the relay has a checkpoint for slot %q in %s (it streamed from the slot before, which was then dropped, lost in a failover or invalidated), "+
		"cdc-relay run exits 3%s: events committed after the checkpoint may be missing from %s, and the repair is "+
		"cdc-relay slot recreate --accept-gap --reason TEXT (same settings as run), then cdc-relay replay --since TIME (TIME %s before the checkpoint's last commit)", slot, place, recreate, broker, checkpoint.ReplayMargin)
	if !lost {
		unknown += "; without a checkpoint, run creates the slot on first start"
	}
	holds := " holds"
	if broker == checkpoint.RabbitMQ {
		holds = " hold"
	}
	var gap *checkpoint.GapError
	switch {
	case lost && !read:
		// An invalidated slot stops run whether or not it has a checkpoint.
		return fmt.Sprintf("cdc-relay run exits 3%s: events committed after the slot's confirmed_flush_lsn may be missing from %s, and the repair is "+
			"cdc-relay slot recreate --accept-gap --reason TEXT (same settings as run), then cdc-relay replay --since TIME (TIME %s before the last confirmed commit; "+
			"with --kafka-brokers and --checkpoint-topic status reads it from the checkpoint topic)", recreate, broker, checkpoint.ReplayMargin) + rabbitSettings
	case !read:
		return unknown + " (set --kafka-brokers, or CDC_RELAY_KAFKA_BROKERS, with --checkpoint-topic, for status to read the checkpoint topic and tell which)" + rabbitSettings
	case errors.As(err, &gap):
		return "cdc-relay run exits 3" + recreate + ": " + gap.Error()
	case errors.Is(err, replication.ErrCheckpointUnavailable):
		return fmt.Sprintf("%s %s cannot be read (%v), and run waits for it before it streams or creates anything; %s", place, topic, err, unknown)
	case err != nil:
		return fmt.Sprintf("%s %s: %v", place, topic, err)
	case verdict == replication.VerdictCreate:
		return fmt.Sprintf("%s %s%s no checkpoint for it: a first start, cdc-relay run creates the slot", place, topic, holds)
	}
	return unknown
}
