package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// Flags are replay's action flags (config.Replay's Actions): read
// from the command line only, so that an environment variable or a YAML key
// can never start a replay.
type Flags struct {
	Since, Until, FromID, ToID string // --since, --until, --from-id, --to-id: "" when not given
	DryRun                     bool   // --dry-run
}

// replayFetch is how many rows one FETCH reads: memory stays bounded by it
// and by the in-flight bounds, whatever the window holds.
const replayFetch = 1000

// replayCursor is the cursor's name in the replay's transaction.
const replayCursor = "cdc_relay_replay"

// Run is `cdc-relay replay`: it re-publishes the rows of cfg's outbox
// tables that f chooses, in each table's id order, and returns the exit
// code of the command (relay.ExitOK, ExitConfig or ExitFailed). Each event
// Kafka acknowledged is a line on stdout; a failure is one line on stderr.
func Run(ctx context.Context, cfg *relay.Config, f Flags, log *slog.Logger, stdout, stderr io.Writer) int {
	r := &replayer{cfg: cfg, rf: f, log: log, stdout: stdout, stderr: stderr}
	return r.run(ctx)
}

// replayer holds one replay's state.
type replayer struct {
	cfg            *relay.Config
	rf             Flags
	log            *slog.Logger
	stdout, stderr io.Writer
}

// fail reports err in one line and returns its exit code (relay.FailExit).
func (r *replayer) fail(what string, err error) int {
	return relay.FailExit(r.stderr, "cdc-relay: replay failed: ", what, err)
}

// replayTable is one table's part of a replay: its rows, how to select
// them, and the types of the builder's extra columns in it.
type replayTable struct {
	info       replication.TableInfo
	w          *replayWindow
	q          *replayQuery
	extraTypes []uint32
	extraMods  []int32
	read       int // rows read
	dryDead    int // of them, in a dry run, invalid ones
}

func (r *replayer) run(ctx context.Context) int {
	cfg := r.cfg
	su, err := relay.NewSetup(cfg, r.log, false)
	if err != nil {
		fmt.Fprintf(r.stderr, "cdc-relay: %v\n", err)
		return relay.ExitConfig
	}

	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := relay.ConnectOutbox(setupCtx, cfg.PGURL)
	if err != nil {
		return r.fail("PostgreSQL", err)
	}
	defer conn.Close(context.Background())
	in, err := relay.Inspect(setupCtx, conn, cfg)
	if err != nil {
		return r.fail("read the catalog", err)
	}
	// Every table's window is checked before anything is published.
	tables := make([]*replayTable, len(in.Tables))
	now := time.Now()
	for i, info := range in.Tables {
		w, err := resolveWindow(r.rf, cfg.Tables[i].Columns, info, now)
		if err != nil {
			return r.fail("", err)
		}
		tables[i] = &replayTable{info: info, w: w}
	}

	builder, err := su.NewBuilder(in)
	if err != nil {
		return r.fail("", err)
	}
	extra := builder.ExtraColumns()
	for i, t := range tables {
		if t.q, err = newReplayQuery(t.info, cfg.Tables[i].Columns, extra, t.w); err != nil {
			return r.fail("", err)
		}
		mods, err := relay.Typmods(setupCtx, conn, t.info.OID)
		if err != nil {
			return r.fail("read the catalog", err)
		}
		t.extraTypes, t.extraMods = make([]uint32, len(extra)), make([]int32, len(extra))
		for j, name := range extra {
			t.extraTypes[j], t.extraMods[j] = t.info.Columns[name].TypeOID, mods[name]
		}
	}
	if err := su.Preflight(setupCtx); err != nil {
		return r.fail("schema registry", err)
	}

	h := su.Invalids()
	acker := newReplayAcker(r.stdout, broker(cfg), len(tables), cfg.MaxInFlightEvents, cfg.MaxInFlightBytes)
	// The sink: Kafka's publisher, or under --rabbitmq-url run's RabbitMQ
	// sink.
	var newSession func(context.Context, publisher.Acker) session
	if cfg.RabbitMQ() {
		if newSession, err = newRabbitSessions(setupCtx, su, acker, r.rf.DryRun); err != nil {
			return r.fail("RabbitMQ", err)
		}
	} else {
		pub, err := su.NewPublisher(func(rec *publisher.Record, err error) (*publisher.Record, error) {
			dl, rerr := h.Rejected(rec, err)
			if rerr == nil {
				acker.rejected(rec.Seq, cfg.DLQTopic, headerText(dl, recordpkg.HeaderError))
			}
			return dl, rerr
		}, nil, nil)
		if err != nil {
			fmt.Fprintf(r.stderr, "cdc-relay: %v\n", err)
			return relay.ExitConfig
		}
		defer pub.Close()
		newSession = func(ctx context.Context, a publisher.Acker) session { return pub.NewSession(ctx, a) }
	}

	for _, t := range tables {
		r.log.Info("replay", "version", relay.Version, "pg_url", relay.Redact(cfg.PGURL), "table", t.info.Name, "rows", t.w.String(),
			brokerKey(cfg), brokerValue(cfg), "dry_run", r.rf.DryRun)
	}
	var sess session
	if !r.rf.DryRun {
		sess = newSession(context.WithoutCancel(ctx), acker)
		defer sess.Close()
	}
	rs := &replayRows{r: r, builder: builder, h: h, acker: acker, sess: sess}
	if cfg.RabbitMQ() {
		f, err := relay.RabbitFormat(cfg) // checked by the sink's making
		if err != nil {
			return r.fail("", err)
		}
		rs.rabbit = &f
	}
	err = rs.readAll(ctx, conn, tables)
	if sess != nil {
		// Whatever was read is published before the exit, even after a
		// failure or a signal (bounded by --shutdown-timeout then).
		dctx := context.WithoutCancel(ctx)
		if err != nil || ctx.Err() != nil {
			var c context.CancelFunc
			dctx, c = context.WithTimeout(dctx, cfg.ShutdownTimeout)
			defer c()
		}
		if derr := sess.Drain(dctx); derr != nil && err == nil {
			err = fmt.Errorf("wait for %s: %w", broker(cfg), derr)
		}
		sess.Close() // no Ack prints after this
	}
	if err == nil && ctx.Err() != nil {
		err = errors.New("interrupted by a signal")
	}
	dead := relay.DeadLetterPlace(cfg)
	if r.rf.DryRun {
		if err != nil {
			return r.fail("read the outbox", err)
		}
		r.summary(tables, "dry run: would replay %d events (%d to "+dead+") %s; published nothing\n",
			func(_ int, t *replayTable) []int { return []int{t.read, t.dryDead} })
		return relay.ExitOK
	}
	if err != nil {
		r.summary(tables, "replay incomplete: %d events acknowledged (%d to "+dead+") of %d read %s\n", func(i int, t *replayTable) []int {
			p, d := acker.counts(i)
			return []int{p, d, t.read}
		})
		return r.fail("", err)
	}
	r.summary(tables, "replayed %d events (%d to "+dead+") %s\n", func(i int, _ *replayTable) []int {
		p, d := acker.counts(i)
		return []int{p, d}
	})
	return relay.ExitOK
}

// summary prints one line of format per table, its counts followed by
// "from TABLE, WINDOW"; with several tables, then a line of their totals,
// "from N tables in total".
func (r *replayer) summary(tables []*replayTable, format string, counts func(i int, t *replayTable) []int) {
	var total []int
	line := func(c []int, where string) {
		args := make([]any, 0, len(c)+1)
		for _, n := range c {
			args = append(args, n)
		}
		fmt.Fprintf(r.stdout, format, append(args, where)...)
	}
	for i, t := range tables {
		c := counts(i, t)
		if total == nil {
			total = make([]int, len(c))
		}
		for j, n := range c {
			total[j] += n
		}
		line(c, "from "+t.info.Name+", "+t.w.String())
	}
	if len(tables) > 1 {
		line(total, fmt.Sprintf("from %d tables in total", len(tables)))
	}
}

// headerText is a header's value as text, or "".
func headerText(rec *publisher.Record, key string) string {
	if rec == nil {
		return ""
	}
	for _, hd := range rec.Headers {
		if hd.Key == key {
			return string(hd.Value)
		}
	}
	return ""
}
