package relay

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/replication"
)

// Version is the relay's version, for cdc_relay_build_info, the
// checkpoint and the start log lines; the command sets it from its build
// (-X main.version).
var Version = "dev"

// Inspect reads the server version and the outbox tables' columns from
// the catalog. A table that does not exist, two names for one table, and
// --message-prefix on a server without logical decoding messages are
// configuration errors, marked fatal so that the stream stops.
func Inspect(ctx context.Context, conn *pgx.Conn, cfg *Config) (*Inspection, error) {
	major, _, err := replication.ServerVersion(ctx, conn)
	if err != nil {
		return nil, err
	}
	in := &Inspection{Major: major}
	seen := map[uint32]string{}
	for _, t := range cfg.Tables {
		info, err := replication.DescribeTable(ctx, conn, t.Name)
		if err != nil {
			return nil, err
		}
		if info.OID == 0 {
			return nil, replication.Fatal(ConfigErr("table", "%s does not exist: create it (docs/outbox.sql) or correct --table", t.Name))
		}
		if first, dup := seen[info.OID]; dup {
			return nil, replication.Fatal(ConfigErr("table", "%s and %s are the same table: give each outbox table once", first, t.Name))
		}
		seen[info.OID] = t.Name
		in.Tables = append(in.Tables, info)
	}
	if len(cfg.Tables) == 0 && in.Major < replication.MessagesMinMajor {
		return nil, replication.Fatal(ConfigErr("table", "is empty (a table-less outbox), but PostgreSQL %d cannot send logical decoding messages to a pgoutput client (PostgreSQL %d+ can): set --table", in.Major, replication.MessagesMinMajor))
	}
	if cfg.MessagePrefixSet && cfg.MessagePrefix != "" && in.Major < replication.MessagesMinMajor {
		return nil, replication.Fatal(ConfigErr("message-prefix", "PostgreSQL %d cannot send logical decoding messages to a pgoutput client (PostgreSQL %d+ can): upgrade the server, or remove --message-prefix", in.Major, replication.MessagesMinMajor))
	}
	return in, nil
}

// Inspection is what the relay reads from the server on its first
// connection.
type Inspection struct {
	Major  int                     // the server's major version
	Tables []replication.TableInfo // the outbox tables, in --table order
}

// TableNames lists the outbox tables' names.
func TableNames(tables []decoder.Table) []string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Name
	}
	return names
}
