package main

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
	"github.com/cdc-relay/cdc-relay/internal/config"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// slotStatus is one row of pg_replication_slots, as `cdc-relay status` prints it.
type slotStatus struct {
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

// status is `cdc-relay status`: the slot's row from the catalog (never the
// outbox table), with lag in bytes.
func status(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	v, code, ok := loadValues(config.Status, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	asJSON := v.ActionBool("json")
	slot := v.String("slot")
	ckpt, err := statusCheckpointConfig(v)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return exitConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, v.String("pg-url"))
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: connect: %s\n", Redact(err.Error()))
		return exitFailed
	}
	defer conn.Close(context.Background())
	st, err := querySlotStatus(ctx, conn, slot)
	if errors.Is(err, errNoSlot) {
		// What run does with a missing slot depends on the checkpoint
		// topic: a first start, or exit 3.
		err = fmt.Errorf("%w: %s", err, runVerdict(v.String("pg-url"), ckpt, slot, replication.SlotInfo{}, false))
	}
	if errors.Is(err, errNoSlot) && asJSON {
		// Still JSON on stdout, for scripts; the exit code says it too.
		printJSON(stdout, struct {
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
		printJSON(stdout, st)
		return exitOK
	}
	pid := "-"
	if st.ActivePID != nil {
		pid = fmt.Sprint(*st.ActivePID)
	}
	safe := "unlimited (max_slot_wal_keep_size = -1)"
	if st.SafeWALSizeBytes != nil {
		safe = fmt.Sprintf("%d bytes", *st.SafeWALSizeBytes)
	}
	fmt.Fprintf(stdout, "slot                 %s (%s, database %s)\n", st.Slot, st.Plugin, st.Database)
	fmt.Fprintf(stdout, "active pid           %s\n", pid)
	fmt.Fprintf(stdout, "confirmed_flush_lsn  %s\n", st.ConfirmedFlushLSN)
	fmt.Fprintf(stdout, "restart_lsn          %s\n", st.RestartLSN)
	fmt.Fprintf(stdout, "current wal lsn      %s\n", st.CurrentWALLSN)
	fmt.Fprintf(stdout, "lag                  %d bytes (current WAL minus confirmed_flush_lsn)\n", st.LagBytes)
	fmt.Fprintf(stdout, "retained wal         %d bytes (current WAL minus restart_lsn)\n", st.RetainedBytes)
	fmt.Fprintf(stdout, "wal_status           %s\n", st.WALStatus)
	fmt.Fprintf(stdout, "safe_wal_size        %s\n", safe)
	switch {
	case st.Failover == nil:
		fmt.Fprintln(stdout, "failover             no (PostgreSQL 17+ only): the slot does not survive a promotion")
	case *st.Failover:
		fmt.Fprintln(stdout, "failover             yes: standbys with sync_replication_slots = on keep it")
	default:
		fmt.Fprintln(stdout, "failover             no: the slot does not survive a promotion (--slot-failover)")
	}
	if st.WALStatus == "lost" {
		fmt.Fprintln(stdout, "WARNING: the slot is lost: PostgreSQL removed WAL it still needed, events may have been lost")
		fmt.Fprintln(stdout, runVerdict(v.String("pg-url"), ckpt, slot, replication.SlotInfo{WALStatus: st.WALStatus}, true))
		return exitFailed
	}
	return exitOK
}

// errNoSlot is querySlotStatus' error for a slot that does not exist.
var errNoSlot = errors.New("no replication slot")

// printJSON writes v indented, as status --json prints.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func querySlotStatus(ctx context.Context, conn *pgx.Conn, slot string) (*slotStatus, error) {
	st := &slotStatus{Slot: slot, Exists: true}
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
		return nil, fmt.Errorf("--slot: %w %q in this cluster", errNoSlot, slot)
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

// statusCheckpointConfig is the part of run's configuration that reads the
// checkpoint topic: the brokers, their TLS and SASL, --checkpoint-topic and
// --relay-id. Without --kafka-brokers it is nil: status then cannot tell a
// first start from a dropped slot, and says so.
func statusCheckpointConfig(v *config.Values) (*Config, error) {
	c := &Config{KafkaBrokers: v.List("kafka-brokers"), CheckpointTopic: v.String("checkpoint-topic"), RelayID: v.String("relay-id"), Slot: v.String("slot")}
	if len(c.KafkaBrokers) == 0 {
		return nil, nil
	}
	if err := kafkaSecurity(c, v); err != nil {
		return nil, err
	}
	return c, nil
}

// runVerdict says what cdc-relay run does with a slot that is missing
// (exists false) or invalidated (lost): it asks the checkpoint guard, as run
// does at start, reading the checkpoint topic and creating nothing.
func runVerdict(pgURL string, cfg *Config, slot string, info replication.SlotInfo, exists bool) string {
	if cfg == nil {
		return verdictText(slot, "", 0, nil, exists, false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	sec, err := cfg.KafkaSettings().Build()
	if err != nil {
		return verdictText(slot, cfg.CheckpointTopic, 0, fmt.Errorf("%w: --kafka-tls: %w", replication.ErrCheckpointUnavailable, err), exists, true)
	}
	rconn, err := replication.ConnectReplication(ctx, pgURL)
	if err != nil {
		return verdictText(slot, cfg.CheckpointTopic, 0, fmt.Errorf("%w: identify the server (a replication connection): %w", replication.ErrCheckpointUnavailable, err), exists, true)
	}
	defer rconn.Close(context.Background())
	server, err := replication.Identify(ctx, rconn)
	if err != nil {
		return verdictText(slot, cfg.CheckpointTopic, 0, fmt.Errorf("%w: %w", replication.ErrCheckpointUnavailable, err), exists, true)
	}
	g := relaypkg.NewGuard(cfg, sec.Opts, slog.New(slog.DiscardHandler), true)
	defer g.Close()
	verdict, _, err := g.Decide(ctx, replication.GuardInput{Server: server, Slot: slot, Info: info, Exists: exists, First: true,
		History: func(ctx context.Context) ([]replication.TimelineSwitch, error) {
			return replication.TimelineHistory(ctx, rconn, server.Timeline)
		}})
	return verdictText(slot, cfg.CheckpointTopic, verdict, err, exists, true)
}

// verdictText is runVerdict's sentence for the guard's verdict and error;
// kafka is false when status could not read the checkpoint topic as it has
// no --kafka-brokers.
func verdictText(slot, topic string, verdict replication.Verdict, err error, lost, kafka bool) string {
	recreate := ""
	if lost {
		recreate = " (unless run has --recreate-lost-slot, which drops and recreates it, logs the gap at ERROR and records it in the checkpoint topic)"
	}
	unknown := fmt.Sprintf("if the relay has a checkpoint for slot %q in the checkpoint topic (it streamed from the slot before, which was then dropped, lost in a failover or invalidated), "+
		"cdc-relay run exits 3%s: events committed after the checkpoint may be missing from Kafka, and the repair is "+
		"cdc-relay slot recreate --accept-gap --reason TEXT (same settings as run), then cdc-relay replay --since TIME (TIME %s before the checkpoint's last commit)", slot, recreate, checkpoint.ReplayMargin)
	if !lost {
		unknown += "; without a checkpoint, run creates the slot on first start"
	}
	var gap *checkpoint.GapError
	switch {
	case lost && !kafka:
		// An invalidated slot stops run whether or not it has a checkpoint.
		return fmt.Sprintf("cdc-relay run exits 3%s: events committed after the slot's confirmed_flush_lsn may be missing from Kafka, and the repair is "+
			"cdc-relay slot recreate --accept-gap --reason TEXT (same settings as run), then cdc-relay replay --since TIME (TIME %s before the last confirmed commit; "+
			"with --kafka-brokers and --checkpoint-topic status reads it from the checkpoint topic)", recreate, checkpoint.ReplayMargin)
	case !kafka:
		return unknown + " (set --kafka-brokers, or CDC_RELAY_KAFKA_BROKERS, with --checkpoint-topic, for status to read the checkpoint topic and tell which)"
	case errors.As(err, &gap):
		return "cdc-relay run exits 3" + recreate + ": " + gap.Error()
	case errors.Is(err, replication.ErrCheckpointUnavailable):
		return fmt.Sprintf("the checkpoint topic %s cannot be read (%v), and run waits for it before it streams or creates anything; %s", topic, err, unknown)
	case err != nil:
		return fmt.Sprintf("the checkpoint topic %s: %v", topic, err)
	case verdict == replication.VerdictCreate:
		return fmt.Sprintf("the checkpoint topic %s holds no checkpoint for it: a first start, cdc-relay run creates the slot", topic)
	}
	return unknown
}
