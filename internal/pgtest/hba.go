package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// SetHBA replaces the cluster's pg_hba.conf with lines and reloads the
// server. The file keeps its owner (the postgres user when running as
// root). Start creates a cluster that trusts every local connection; a test
// of password authentication gives some roles scram-sha-256 here, and keeps
// superuser postgres trusted so that Exec and Connect still work.
func (c *Cluster) SetHBA(ctx context.Context, lines ...string) error {
	if err := os.WriteFile(filepath.Join(c.dataDir(), "pg_hba.conf"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	return c.Exec(ctx, "", "SELECT pg_catalog.pg_reload_conf()")
}
