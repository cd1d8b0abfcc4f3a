package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// StartStandby makes a physical streaming standby of primary without
// pg_basebackup (the Maven Central bundles have none, and Debian's 15 refuses
// newer servers): it creates the physical slot on the primary, stops the
// primary cleanly, copies its data directory, and starts both. On 17+ the
// standby synchronises failover slots (sync_replication_slots = on) and
// sends hot standby feedback. The standby runs the primary's version and
// settings on a port of its own.
func StartStandby(primary *Cluster, slot string) (*Cluster, error) {
	ctx := context.Background()
	if err := primary.Exec(ctx, "", "SELECT pg_create_physical_replication_slot($1, true)", slot); err != nil {
		return nil, fmt.Errorf("pgtest: create physical slot %s: %w", slot, err)
	}
	if err := primary.Stop("fast"); err != nil {
		return nil, err
	}
	sb, err := newCluster(primary.opts)
	if err != nil {
		return nil, err
	}
	sb.opts.Port = 0
	if out, err := exec.Command("cp", "-a", primary.dataDir(), sb.dataDir()).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: copy data directory: %v: %s", err, out)
	}
	for _, p := range []string{"postmaster.pid", "postmaster.opts"} {
		os.Remove(filepath.Join(sb.dataDir(), p))
	}
	slots, _ := filepath.Glob(filepath.Join(sb.dataDir(), "pg_replslot", "*"))
	for _, p := range slots {
		os.RemoveAll(p)
	}
	conf := fmt.Sprintf("\nprimary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=%s'\nprimary_slot_name = '%s'\nhot_standby_feedback = on\n",
		primary.port, slot, slot)
	if primary.Version() >= 17 {
		conf += "sync_replication_slots = on\n"
	}
	if err := appendFile(filepath.Join(sb.dataDir(), "postgresql.auto.conf"), conf); err != nil {
		return nil, err
	}
	signal := filepath.Join(sb.dataDir(), "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return nil, err
	}
	if sb.uid != nil {
		uid, _ := strconv.Atoi(sb.uid.Uid)
		gid, _ := strconv.Atoi(sb.uid.Gid)
		if err := os.Chown(signal, uid, gid); err != nil {
			return nil, err
		}
	}
	if err := primary.Start(); err != nil {
		return nil, err
	}
	if err := sb.Start(); err != nil {
		return nil, err
	}
	return sb, nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Promote promotes a standby to primary and waits until it accepts writes.
func (c *Cluster) Promote() error {
	_, err := c.run("pg_ctl", "-D", c.dataDir(), "-w", "-t", "60", "promote")
	return err
}
