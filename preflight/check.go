package preflight

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// checker runs the preflight checks of `cdc-relay check` and prints one line
// per check: "ok" and what was found, or "FAIL", the problem and the fix.
type checker struct {
	out    io.Writer
	failed int
	// server is what IDENTIFY_SYSTEM answered (nil when PostgreSQL was not
	// reached): with --slot it makes the default relay id, and so the
	// default transactional id that the Kafka ACL check asks about.
	server *replication.Server
}

func (c *checker) ok(format string, args ...any) {
	fmt.Fprintf(c.out, "ok    %s\n", fmt.Sprintf(format, args...))
}

// warn reports something that works but may not be what the user wants;
// it does not fail the check.
func (c *checker) warn(format string, args ...any) {
	fmt.Fprintf(c.out, "WARN  %s\n", fmt.Sprintf(format, args...))
}

func (c *checker) fail(format string, args ...any) {
	c.failed++
	fmt.Fprintf(c.out, "FAIL  %s\n", fmt.Sprintf(format, args...))
}

// noStandbySlots is the warning for a failover slot without
// synchronized_standby_slots, naming the broker cfg publishes to.
func noStandbySlots(cfg *relay.Config) string {
	broker := "Kafka"
	if cfg.RabbitMQ() {
		broker = "RabbitMQ"
	}
	return "synchronized_standby_slots is not set: the relay may receive (and publish) transactions a standby lacks, which a failover then loses from the database but not from " +
		broker + "; set it to the standbys' physical slots (ALTER SYSTEM SET synchronized_standby_slots = '...'; SELECT pg_reload_conf())"
}

// Run is `cdc-relay check`: it checks PostgreSQL, the slot, the outbox
// tables, the checkpoint, Kafka, the registry and the schemas as cfg
// configures them, printing one line per check on out ("ok", "WARN" or
// "FAIL" with the fix) and a last line with the verdict. It reads only
// catalogs and metadata, never the outbox table, and changes nothing. It
// returns how many checks failed; ctx bounds it.
func Run(ctx context.Context, cfg *relay.Config, out io.Writer) (failed int) {
	c := &checker{out: out}
	c.postgres(ctx, cfg)
	if cfg.RabbitMQ() {
		c.rabbitmq(ctx, RabbitMQConfig{URL: cfg.RabbitMQURL, TLS: cfg.RabbitMQTLSConfig(), Exchange: cfg.RabbitMQExchange, Declare: cfg.RabbitMQDeclare,
			RoutingKey: cfg.RoutingKey, Checkpoints: relay.RabbitCheckpointConfig(cfg), RelayID: c.relayID(cfg), DLQStream: cfg.RabbitMQDLQStream})
	} else {
		c.kafka(ctx, cfg)
	}
	if cfg.SchemaRegistryURL != "" {
		c.registry(ctx, cfg)
	}
	if c.failed > 0 {
		fmt.Fprintf(out, "%d check(s) failed\n", c.failed)
		return c.failed
	}
	fmt.Fprintln(out, "all checks passed")
	return 0
}

func (c *checker) postgres(ctx context.Context, cfg *relay.Config) {
	conn, err := pgx.Connect(ctx, cfg.PGURL)
	if err != nil {
		// The same words as run's exit on an error no retry fixes.
		if u := replication.Unrecoverable(err, "", ""); u != nil {
			c.fail("PostgreSQL: %s", relay.Redact(u.Error()))
		} else {
			c.fail("PostgreSQL: cannot connect (%s): check --pg-url, the network and pg_hba.conf", relay.Redact(replication.ConnectCause(err)))
		}
		return
	}
	defer conn.Close(context.Background())
	c.ok("PostgreSQL: connected to %s", relay.Redact(cfg.PGURL))

	if err := replication.CheckWALLevel(ctx, conn); err != nil {
		c.fail("PostgreSQL: %v", err)
	} else {
		c.ok("wal_level = logical")
	}
	var maxSlots, usedSlots, maxSenders, usedSenders int
	conn.QueryRow(ctx, `SELECT current_setting('max_replication_slots')::int, (SELECT count(*) FROM pg_catalog.pg_replication_slots),
		current_setting('max_wal_senders')::int, (SELECT count(*) FROM pg_catalog.pg_stat_replication)`).Scan(&maxSlots, &usedSlots, &maxSenders, &usedSenders)
	info, slotExists, slotErr := replication.LookupSlot(ctx, conn, cfg.Slot)
	switch {
	case slotExists || usedSlots < maxSlots:
		c.ok("max_replication_slots = %d (%d in use)", maxSlots, usedSlots)
	default:
		c.fail("max_replication_slots = %d and all are in use: raise max_replication_slots (restart needed) or drop an unused slot", maxSlots)
	}
	if usedSenders < maxSenders {
		c.ok("max_wal_senders = %d (%d in use)", maxSenders, usedSenders)
	} else {
		c.fail("max_wal_senders = %d and all are in use: raise max_wal_senders (restart needed)", maxSenders)
	}
	var role string
	var canReplicate bool
	conn.QueryRow(ctx, `SELECT current_user, rolreplication OR rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user`).Scan(&role, &canReplicate)
	if canReplicate {
		c.ok("role %s has the REPLICATION attribute", role)
	} else {
		c.fail("role %s lacks the REPLICATION attribute: run ALTER ROLE %s WITH REPLICATION", role, pgx.Identifier{role}.Sanitize())
	}
	c.tables(ctx, conn, cfg)
	c.messages(ctx, conn, cfg)
	c.publication(ctx, conn, cfg)
	c.failover(ctx, conn, cfg, info, slotExists)
	if slotErr == nil && c.checkpoint(ctx, cfg, info, slotExists) {
		c.firstStartRows(ctx, conn, cfg)
	}
	switch {
	case slotErr != nil:
		c.fail("slot %s: %v", cfg.Slot, slotErr)
	case !slotExists:
		// The checkpoint tells a first start from a lost slot: see c.checkpoint.
	default:
		var db string
		conn.QueryRow(ctx, "SELECT current_database()").Scan(&db)
		switch {
		case info.Type != "logical":
			c.fail("slot %s is a %s slot: it can't be reused, the relay needs a logical pgoutput slot; set --slot to another name", cfg.Slot, info.Type)
		case info.Plugin != "pgoutput":
			c.fail("slot %s uses plugin %q: it can't be reused, the relay reads pgoutput only (a Debezium slot with plugin.name=decoderbufs, or a wal2json slot, keeps its own format); %s",
				cfg.Slot, info.Plugin, replication.OtherPluginFix(cfg.Slot))
		case info.Database != db:
			c.fail("slot %s belongs to database %s, not %s: point --pg-url at %s or set --slot", cfg.Slot, info.Database, db, info.Database)
		case info.Invalidated():
			// Reported with the checkpoint, below.
		case info.ActivePID != 0:
			c.ok("slot %s: pgoutput, wal_status %s, confirmed %s, active in pid %d (a relay streams from it; another instance would be a standby)", cfg.Slot, info.WALStatus, info.Confirmed, info.ActivePID)
		default:
			c.ok("slot %s: pgoutput, wal_status %s, confirmed %s, not active", cfg.Slot, info.WALStatus, info.Confirmed)
		}
	}
}

// checkpoint reads the checkpoint topic (creating nothing) and reports what
// run would decide from it and the slot: a first start, a gap (exit 3), or
// streaming, with run's warnings. It reports whether run would take it for
// a first start.
func (c *checker) checkpoint(ctx context.Context, cfg *relay.Config, info replication.SlotInfo, slotExists bool) (first bool) {
	rconn, err := replication.ConnectReplication(ctx, cfg.PGURL)
	if err != nil {
		c.fail("PostgreSQL: cannot open a replication connection (%s): the role needs the REPLICATION attribute and pg_hba.conf must let it connect", relay.Redact(err.Error()))
		return false
	}
	defer rconn.Close(context.Background())
	server, err := replication.Identify(ctx, rconn)
	if err != nil {
		c.fail("PostgreSQL: %v", err)
		return false
	}
	c.server = &server
	// Where the checkpoint is kept: name, and where as a phrase.
	name, where, what := cfg.CheckpointTopic, "checkpoint topic "+cfg.CheckpointTopic, "Kafka"
	if cfg.RabbitMQ() {
		name = cfg.RabbitMQCheckpointStream + ".*"
		where, what = "checkpoint streams "+name, "RabbitMQ"
	}
	sec, err := cfg.KafkaSettings().Build()
	if err != nil {
		c.fail("--kafka-tls: %v", err)
		return false
	}
	g := relay.NewGuard(cfg, sec.Opts, discardLogger(), true)
	defer g.Close()
	in := replication.GuardInput{Server: server, Slot: cfg.Slot, Info: info, Exists: slotExists, First: true,
		History: func(ctx context.Context) ([]replication.TimelineSwitch, error) {
			return replication.TimelineHistory(ctx, rconn, server.Timeline)
		}}
	v, warns, err := g.Decide(ctx, in)
	if err == nil && slotExists && !info.Invalidated() {
		// info was read before the checkpoint, which only grows: a slot
		// ahead of it was made or moved outside the relay.
		err = g.Ahead(ctx, in)
	}
	for _, w := range warns {
		c.warn("%s", w)
	}
	switch {
	case err != nil && errors.Is(err, replication.ErrCheckpointUnavailable):
		c.fail("%s cannot be read (%v): the relay waits for %s before it streams, and never takes an unreadable checkpoint for a first start", where, err, what)
	case err != nil:
		c.fail("%v", err)
	case v == replication.VerdictCreate:
		c.ok("slot %s does not exist yet, and the %s has no checkpoint for it: a first start, the relay creates the slot (pgoutput)", cfg.Slot, where)
		first = true
	case v == replication.VerdictRecreate:
		c.warn("slot %s was invalidated (%s): --recreate-lost-slot is set, so the relay drops and recreates it, records the gap in %s and logs it at ERROR; events since %s may be missing from %s",
			cfg.Slot, info.WALStatus, name, info.Confirmed, what)
	case g.Last() != nil:
		last := g.Last()
		c.ok("checkpoint %s in %s: confirmed %s on timeline %d, written %s", g.RelayID(), name, last.LSN, last.Timeline, last.WrittenAt.Format(time.RFC3339))
	default:
		c.ok("no checkpoint for relay id %s in %s yet: the relay writes one when it streams", g.RelayID(), name)
	}
	return first
}

// firstStartRows warns, before a first start, when a configured table
// seems to hold rows (pg_stat_user_tables, never the table): the slot
// never decodes rows written before it exists.
func (c *checker) firstStartRows(ctx context.Context, conn *pgx.Conn, cfg *relay.Config) {
	names := relay.TableNames(cfg.Tables)
	rows, err := replication.ExistingRows(ctx, conn, names)
	if err != nil || len(rows) == 0 {
		return
	}
	seems := make([]string, len(rows))
	for i, r := range rows {
		seems[i] = r.String()
	}
	if cfg.InitialReplay {
		c.ok("first start: %s seem to hold rows written before the slot will exist (a heuristic from pg_stat_user_tables): --initial-replay publishes the rows created before the slot's creation, then streams",
			strings.Join(seems, ", "))
		return
	}
	c.warn("first start: %s seem to hold rows written before the slot will exist (a heuristic from pg_stat_user_tables, reset after a crash and on a promoted standby; the tables themselves are never read): "+
		"the slot never decodes them. Set --initial-replay to publish them before streaming, or run the command run logs at WARN once it created the slot: "+
		"cdc-relay replay%s --since %s --until <the database clock read right after the slot's creation>",
		strings.Join(seems, ", "), tableFlags(names), replication.ReplaySince)
}

// tableFlags is " --table T" for each of tables.
func tableFlags(tables []string) string {
	var b strings.Builder
	for _, t := range tables {
		b.WriteString(" --table " + t)
	}
	return b.String()
}

// failover checks the server version against --slot-failover, whether the
// slot will survive a promotion, and on a 17+ primary whether
// synchronized_standby_slots keeps the relay from receiving transactions a
// standby lacks.
func (c *checker) failover(ctx context.Context, conn *pgx.Conn, cfg *relay.Config, info replication.SlotInfo, slotExists bool) {
	major, version, err := replication.ServerVersion(ctx, conn)
	if err != nil {
		c.fail("PostgreSQL: %v", err)
		return
	}
	inRecovery, _ := replication.InRecovery(ctx, conn)
	if inRecovery {
		c.warn("PostgreSQL %s is a standby (in recovery): the relay waits for its promotion (/readyz: waiting) and creates nothing on it; point --pg-url at the primary, or list every host with target_session_attrs=read-write", version)
	}
	on, err := cfg.SlotFailover.Enabled(major, version)
	if err != nil {
		c.fail("%v", err)
		return
	}
	switch {
	case major < replication.FailoverSlotsMajor:
		c.warn("PostgreSQL %s has no failover slots (17+): slot %s will not survive a promotion of a standby; after a failover the relay halts rather than skip events", version, cfg.Slot)
		return
	case !on && (!slotExists || !info.Failover):
		c.warn("--slot-failover false: slot %s is not a failover slot and won't survive a promotion: after a failover the relay halts (slot does not exist); set --slot-failover auto", cfg.Slot)
	case slotExists && info.Failover:
		c.ok("slot %s is a failover slot: a standby with sync_replication_slots = on keeps it through a promotion", cfg.Slot)
	case slotExists:
		c.ok("slot %s is not a failover slot yet: the relay turns it into one on start (--slot-failover %s)", cfg.Slot, cfg.SlotFailover)
	default:
		c.ok("PostgreSQL %s: the relay creates slot %s as a failover slot (--slot-failover %s)", version, cfg.Slot, cfg.SlotFailover)
	}
	if inRecovery || !on {
		return
	}
	var standbySlots string
	conn.QueryRow(ctx, "SELECT current_setting('synchronized_standby_slots')").Scan(&standbySlots)
	if standbySlots == "" {
		c.warn("%s", noStandbySlots(cfg))
	} else {
		c.ok("synchronized_standby_slots = %s: the relay receives only what those standbys have", standbySlots)
	}
}

// tables checks that each outbox table exists, once, and has the columns
// the relay maps and the header and timestamp columns, from the catalog:
// the tables themselves are never read.
func (c *checker) tables(ctx context.Context, conn *pgx.Conn, cfg *relay.Config) {
	if len(cfg.Tables) == 0 {
		c.ok("no outbox table: a table-less outbox of logical decoding messages with prefix %q", cfg.MessagePrefix)
		return
	}
	seen := map[uint32]string{}
	var described []recordpkg.Table
	var intIDs []string // tables with integer ids, for integerIDs
	for _, t := range cfg.Tables {
		info, err := replication.DescribeTable(ctx, conn, t.Name)
		switch {
		case err != nil:
			c.fail("table %s: %v", t.Name, err)
			continue
		case info.OID == 0:
			c.fail("table %s does not exist: create it (docs/outbox.sql) or correct --table", t.Name)
			continue
		case seen[info.OID] != "":
			c.fail("--table %s and %s are the same table: give each outbox table once", seen[info.OID], t.Name)
			continue
		}
		seen[info.OID] = t.Name
		required := []string{t.Columns.ID, t.Columns.AggregateType, t.Columns.AggregateID, t.Columns.EventType, t.Columns.Payload}
		var missing []string
		for _, col := range required {
			if _, ok := info.Columns[col]; !ok {
				missing = append(missing, col)
			}
		}
		if len(missing) > 0 {
			c.fail("table %s lacks column(s) %s: add them (docs/outbox.sql) or map them with columns: in --config", t.Name, strings.Join(missing, ", "))
			continue
		}
		optional := ""
		if _, ok := info.Columns[t.Columns.Headers]; !ok {
			optional = " (no headers column: only id, event_type and aggregate_type headers)"
		}
		c.ok("table %s has the required columns%s", t.Name, optional)
		described = append(described, recordpkg.Table{Name: t.Name, AggregateID: t.Columns.AggregateID, Columns: info.Columns})
		if col := info.Columns[t.Columns.ID]; integerID(col) {
			intIDs = append(intIDs, t.Name+" ("+t.Columns.ID+" "+col.Type+")")
		}
	}
	c.integerIDs(cfg, intIDs)
	if len(cfg.HeaderColumns) > 0 || cfg.TimestampColumn != "" {
		rc := recordpkg.Config{ValueFormat: recordpkg.ValueJSON, HeaderColumns: cfg.HeaderColumns, TimestampColumn: cfg.TimestampColumn, Tables: described}
		if _, err := recordpkg.New(rc); err != nil {
			c.fail("%v", err)
			return
		}
		c.ok("header and timestamp columns exist and have usable types")
	}
}

// messages checks that the server can send the logical decoding messages
// --message-prefix asks for.
func (c *checker) messages(ctx context.Context, conn *pgx.Conn, cfg *relay.Config) {
	major, _, err := replication.ServerVersion(ctx, conn)
	switch {
	case err != nil:
		c.fail("PostgreSQL: %v", err)
	case cfg.MessagePrefix == "":
	case major >= replication.MessagesMinMajor:
		c.ok("logical decoding messages with prefix %q are outbox events (PostgreSQL %d)", cfg.MessagePrefix, major)
	case cfg.MessagePrefixSet || len(cfg.Tables) == 0:
		c.fail("--message-prefix %q: PostgreSQL %d cannot send logical decoding messages to a pgoutput client (PostgreSQL %d+ can): upgrade the server, or remove --message-prefix and set --table",
			cfg.MessagePrefix, major, replication.MessagesMinMajor)
	}
}

func (c *checker) publication(ctx context.Context, conn *pgx.Conn, cfg *relay.Config) {
	var exists, allTables bool
	conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1),
		coalesce((SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = $1), false)`, cfg.Publication).Scan(&exists, &allTables)
	if !exists {
		c.ok("publication %s does not exist yet: the relay creates it on start (needs ownership of %s)", cfg.Publication, strings.Join(relay.TableNames(cfg.Tables), ", "))
		return
	}
	names := relay.TableNames(cfg.Tables)
	drift, err := replication.DescribeDrift(ctx, conn, cfg.Publication, names)
	if err != nil {
		c.fail("%v", err)
		return
	}
	if err := drift.FilterError(cfg.Publication); err != nil {
		c.fail("%v", err)
	}
	if err := drift.ExtrasError(cfg.Publication, names); err != nil {
		if cfg.AllowExtraTables {
			c.ok("publication %s publishes other tables besides the outbox tables: their rows are skipped and counted in cdc_relay_skipped_rows_total (--allow-extra-tables)", cfg.Publication)
		} else {
			c.fail("%v", err)
		}
	}
	missing := map[string]bool{}
	for _, m := range drift.Missing {
		if m.Partitioned {
			continue // CheckPublication says why
		}
		missing[m.Name] = true
		if m.CanAdd {
			c.warn("publication %s does not publish %s: the relay adds it at start (%s), as its role %s owns both; %s",
				cfg.Publication, m.Name, replication.AddTableStatement(cfg.Publication, m.Name), drift.Role, replication.NeverDecoded(m.Name))
		} else {
			c.fail("%v", drift.MissingError(cfg.Publication, m))
		}
		// Statistics, not the table: the relay never reads the outbox.
		if m.Inserts > 0 {
			c.warn("table %s has received %d inserts (pg_stat_user_tables.n_tup_ins) but publication %s does not publish it: those rows were never decoded and never will be; "+
				"once the table is published, publish them with cdc-relay replay --table %s --since %s --until <the instant it joined the publication: run logs this command with it when it adds the table>; "+
				"the counts are a heuristic (reset after a crash and on a promoted standby)", m.Name, m.Inserts, cfg.Publication, m.Name, replication.ReplaySince)
		}
	}
	for _, t := range cfg.Tables {
		schema, name := replication.SplitTable(t.Name)
		if missing[schema+"."+name] {
			continue
		}
		if err := replication.CheckPublication(ctx, conn, cfg.Publication, t.Name); err != nil {
			c.fail("%v", err)
		} else {
			c.ok("publication %s publishes inserts of %s", cfg.Publication, t.Name)
		}
	}
	if allTables {
		c.warn("publication %s is FOR ALL TABLES (Debezium's default): every table's changes cross the wire to the relay, which skips them; "+
			"a publication of the outbox alone is cheaper: CREATE PUBLICATION cdc_relay FOR TABLE %s WITH (publish = 'insert', publish_via_partition_root = true) and set --publication cdc_relay",
			cfg.Publication, strings.Join(relay.TableNames(cfg.Tables), ", "))
	}
}

func (c *checker) kafka(ctx context.Context, cfg *relay.Config) {
	kc, err := checkClient(cfg)
	if err != nil {
		c.fail("Kafka: %v", err)
		return
	}
	defer kc.Close()
	// Every topic the principal may describe, with its rights on each.
	md, err := kadm.NewClient(kc).Metadata(kadm.WithAuthorizedOps(ctx))
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "SASL") || strings.Contains(msg, "Authentication"):
			c.fail("Kafka: authentication failed (%v): check --kafka-sasl-mechanism, --kafka-sasl-username and the password", err)
		case strings.Contains(msg, "x509") || strings.Contains(msg, "tls"):
			c.fail("Kafka: TLS failed (%v): check --kafka-tls-ca-file and the client certificate", err)
		default:
			c.fail("Kafka: brokers %s unreachable (%v): check --kafka-brokers and the network", strings.Join(cfg.KafkaBrokers, ","), err)
		}
		return
	}
	c.ok("Kafka: %d broker(s) reachable via %s", len(md.Brokers), strings.Join(cfg.KafkaBrokers, ","))
	k := newKafkaView(kc, md)
	auto := ""
	if conf, err := k.brokerConfigs(ctx, md.Controller); err == nil {
		auto = conf["auto.create.topics.enable"]
	}
	switch {
	case auto == "true":
		c.ok("Kafka: broker auto-creation is on: topics are created on first use")
	case md.Topics.Has(cfg.DLQTopic):
		c.ok("Kafka: auto-creation is %s; dead-letter topic %s exists (create every %s topic before its first event)", orUnknown(auto), cfg.DLQTopic, cfg.TopicTemplate)
	default:
		c.fail("Kafka: auto-creation is %s and dead-letter topic %s does not exist: create it (and every %s topic) or enable auto.create.topics.enable", orUnknown(auto), cfg.DLQTopic, cfg.TopicTemplate)
	}
	if err := k.describe(ctx, cfg.DLQTopic, cfg.CheckpointTopic); err != nil {
		c.warn("Kafka: cannot read the topics' metadata with the principal's rights (%v): retention, replication and ACLs not checked", err)
		return
	}
	c.dlqRetention(ctx, cfg, k, md.Controller)
	c.checkpointReplicas(ctx, cfg, k, md.Controller)
	c.acls(ctx, cfg, k)
}

func orUnknown(s string) string {
	switch s {
	case "":
		return "unknown"
	case "false":
		return "off"
	}
	return s
}

func (c *checker) registry(ctx context.Context, cfg *relay.Config) {
	schemas, err := schemaregistry.LoadDir(cfg.SchemasDir)
	if err != nil {
		c.fail("schemas: %v", err)
	} else {
		c.ok("schemas: %d .avsc file(s) in %s compile", len(schemas), cfg.SchemasDir)
	}
	u, err := url.Parse(cfg.SchemaRegistryURL)
	if err != nil {
		c.fail("schema registry: %v", err)
		return
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.SchemaRegistryURL, "/")+"/subjects", nil)
	if u.User != nil {
		pass, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pass)
		u.User = nil
		req.URL.User = nil
	}
	hc, err := relay.RegistryHTTPClient(cfg)
	if err != nil {
		c.fail("schema registry: %v", err)
		return
	}
	if hc == nil {
		hc = &http.Client{}
	}
	hc.Timeout = 10 * time.Second
	resp, err := hc.Do(req)
	if err != nil {
		c.fail("schema registry %s unreachable (%v): check --schema-registry-url", u.Redacted(), err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.fail("schema registry %s answered %s to GET /subjects: check the URL and credentials", u.Redacted(), resp.Status)
		return
	}
	c.ok("schema registry %s reachable", u.Redacted())
	if schemas == nil {
		return
	}
	c.compatibility(ctx, cfg, schemas)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
