package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
)

// slotStatus is one row of pg_replication_slots, as `cdc-relay status` prints it.
type slotStatus struct {
	Slot              string `json:"slot"`
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
	fs := flag.NewFlagSet("cdc-relay status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	pgURL := fs.String("pg-url", "", "libpq URL or DSN (env CDC_RELAY_PG_URL)")
	slot := fs.String("slot", "", "logical replication slot (env CDC_RELAY_SLOT, default cdc_relay)")
	configPath := fs.String("config", "", "YAML file with the same keys as `cdc-relay run` (env CDC_RELAY_CONFIG)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "Usage: cdc-relay status [--pg-url URL] [--slot NAME] [--config FILE] [--json]")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return exitOK
		}
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	resolve := func(v *string, name, def string) error {
		if *v != "" {
			return nil
		}
		if e := getenv(EnvName(name)); e != "" {
			*v = e
			return nil
		}
		if *configPath == "" {
			*configPath = getenv(EnvName("config"))
		}
		if *configPath != "" {
			y, err := readYAML(*configPath)
			if err != nil {
				return err
			}
			if yv, ok := y.get(name); ok {
				*v = yv
				return nil
			}
		}
		*v = def
		return nil
	}
	if err := resolve(pgURL, "pg-url", ""); err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	if err := resolve(slot, "slot", "cdc_relay"); err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	if *pgURL == "" {
		fmt.Fprintf(stderr, "cdc-relay: --pg-url: is required: set the flag, %s, or pg-url in --config\n", EnvName("pg-url"))
		return exitConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, *pgURL)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: connect: %s\n", Redact(err.Error()))
		return exitFailed
	}
	defer conn.Close(context.Background())
	st, err := querySlotStatus(ctx, conn, *slot)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitFailed
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(st)
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
		return exitFailed
	}
	return exitOK
}

func querySlotStatus(ctx context.Context, conn *pgx.Conn, slot string) (*slotStatus, error) {
	st := &slotStatus{Slot: slot}
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
		return nil, fmt.Errorf("--slot: no replication slot %q in this cluster (the relay creates it on first start)", slot)
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
