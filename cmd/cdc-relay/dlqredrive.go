package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
)

// redriveBatch is how many letters one poll takes: they are built,
// produced, acknowledged and then committed together, so a kill repeats at
// most this many.
const redriveBatch = 100

// redriveSession is the group session timeout: how long a redrive that
// died keeps its partitions from the next run.
const redriveSession = 10 * time.Second

// redriveJoin bounds the wait for the group to assign partitions.
const redriveJoin = 2 * time.Minute

// redrivePrefix is the message prefix of the pgoutput message a
// message's dead letter is decoded from again (any prefix would do: the
// decoder is redrive's own).
const redrivePrefix = "redrive"

// redriveFlags are dlq redrive's action flags.
type redriveFlags struct {
	dryRun, follow      bool
	id, eventType, kind string
	since               time.Time
	hasID, hasEventType bool
	hasKind, hasSince   bool
}

// redriveActions reads the action flags; a valued one given empty is an error.
func redriveActions(v *config.Values, now time.Time) (redriveFlags, error) {
	rf, err := filterActions(v, now)
	rf.follow = v.ActionBool("follow")
	return rf, err
}

// filterActions reads --dry-run and the filters (--id, --event-type,
// --kind, --since) of dlq redrive and dlq retire.
func filterActions(v *config.Values, now time.Time) (redriveFlags, error) {
	rf := redriveFlags{dryRun: v.ActionBool("dry-run")}
	for _, a := range []struct {
		name string
		dst  *string
		has  *bool
	}{{"id", &rf.id, &rf.hasID}, {"event-type", &rf.eventType, &rf.hasEventType}, {"kind", &rf.kind, &rf.hasKind}} {
		if val, given := v.Action(a.name); given {
			if *a.dst = strings.TrimSpace(val); *a.dst == "" {
				return rf, cfgErr(a.name, "is empty")
			}
			*a.has = true
		}
	}
	if val, given := v.Action("since"); given {
		t, err := relaypkg.ParseTime("since", strings.TrimSpace(val), now)
		if err != nil {
			return rf, err
		}
		rf.since, rf.hasSince = t, true
	}
	return rf, nil
}

// filtered says why the filters leave letter l out, "" when they keep it.
func (rf *redriveFlags) filtered(l *recordpkg.Letter) string {
	header := func(key string) string { v, _ := l.Header(key); return string(v) }
	switch {
	case rf.hasID && header(router.HeaderID) != rf.id:
		return "--id"
	case rf.hasEventType && header(router.HeaderEventType) != rf.eventType:
		return "--event-type"
	case rf.hasKind && l.Kind() != rf.kind:
		return "--kind"
	case rf.hasSince && l.Time.Before(rf.since):
		return "--since"
	}
	return ""
}

// The outcomes of one letter.
const (
	outRedriven = iota
	outFailing  // built again into a dead letter, re-appended
	outFiltered // left out by the filters, re-appended unchanged
	outSkipped  // cannot be built again: re-appended unchanged, still pending
	outRetired  // retired by dlq retire: passed over
)

// redriveItem is one letter of a batch and what became of it.
type redriveItem struct {
	src     *kgo.Record
	seq     uint64
	outcome int
	id      string
	topic   string // where the record went
	kind    string // a failing letter's error_kind now
	reason  string // why it still fails, or is skipped
	attempt int    // a failing letter's redrive_attempts now
	rowKey  []byte // an unconfigured_table letter's key now (its aggregate_id)
	rowID   []byte // and its id now
}

func (it *redriveItem) String() string {
	where := fmt.Sprintf("partition=%d offset=%d", it.src.Partition, it.src.Offset)
	switch it.outcome {
	case outRedriven:
		key := it.src.Key
		if it.rowKey != nil {
			key = it.rowKey
		}
		return fmt.Sprintf("redriven id=%s topic=%s key=%s %s", it.id, it.topic, relaypkg.Token(key), where)
	case outFailing:
		return fmt.Sprintf("still failing id=%s kind=%s redrive_attempts=%d %s reason=%s", it.id, it.kind, it.attempt, where, strconv.Quote(it.reason))
	case outFiltered:
		return fmt.Sprintf("skipped id=%s %s: left out by %s, re-appended unchanged", it.id, where, it.reason)
	case outRetired:
		return fmt.Sprintf("skipped id=%s %s: retired (dlq retire, reason %s)", it.id, where, strconv.Quote(it.reason))
	}
	return fmt.Sprintf("skipped id=%s %s: %s", it.id, where, it.reason)
}

// redriver holds one redrive's state.
type redriver struct {
	cfg            *Config
	rf             redriveFlags
	group          string
	retiredTopic   string
	log            *slog.Logger
	stdout, stderr io.Writer

	builder *recordpkg.Builder
	dec     *decoder.Decoder
	tables  map[string]tableTypes // by "schema.table"
	// relations are the tables by the name their Relation message gives
	// (schema.table, unquoted), which an unconfigured_table letter keeps.
	relations map[string]recordpkg.Relation
	sess      *publisher.Session

	mu    sync.Mutex
	items map[uint64]*redriveItem // the batch in flight, by seq (Reject)

	seq    uint64
	counts [5]int
	// retired are the retirements of the DLQ's letters (dlq retire), by
	// retiredKey, as of the start.
	retired map[string]retirement
	dlqID   [16]byte
	mine    map[string]bool // follow: id and attempts of the letters this run appended
}

// tableTypes is what a rebuilt row of one table needs from the catalog.
type tableTypes struct {
	oid   uint32
	types []uint32
	mods  []int32
	// rel is the table as its Relation message would describe it, for an
	// unconfigured_table letter of the table.
	rel recordpkg.Relation
}

// dlqRedrive is `cdc-relay dlq redrive`.
func dlqRedrive(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, v, code, ok := commandConfig(config.DLQRedrive, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	rf, err := redriveActions(v, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	r := &redriver{cfg: cfg, rf: rf, group: v.String("group"), retiredTopic: v.String("dlq-retired-topic"), log: log, stdout: stdout, stderr: stderr,
		items: map[uint64]*redriveItem{}, mine: map[string]bool{}}
	return r.run(ctx)
}

// fail reports err in one line and returns its exit code (relay.FailExit).
func (r *redriver) fail(what string, err error) int {
	return relaypkg.FailExit(r.stderr, "cdc-relay dlq redrive failed: ", what, err)
}

func (r *redriver) run(ctx context.Context) int {
	cfg := r.cfg
	if code, ok := r.setup(ctx); !ok {
		return code
	}
	opts, err := kgoOptions(cfg)
	if err != nil {
		return r.fail("", err)
	}
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return r.fail("Kafka", err)
	}
	defer admin.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start, err := listOffsets(sctx, admin, cfg.DLQTopic, -2)
	if errors.Is(err, errNoTopic) && !r.rf.follow {
		fmt.Fprintf(r.stdout, "redrive: %s does not exist, nothing to redrive; redriven 0, still failing 0, skipped 0\n", cfg.DLQTopic)
		return exitOK
	}
	if err != nil {
		return r.fail("Kafka", err)
	}
	end, err := listOffsets(sctx, admin, cfg.DLQTopic, -1)
	if err != nil {
		return r.fail("Kafka", err)
	}
	committed, err := committedOffsets(sctx, admin, r.group, cfg.DLQTopic)
	if err != nil {
		return r.fail("Kafka", err)
	}
	if r.dlqID, err = topicID(sctx, admin, cfg.DLQTopic); err != nil {
		return r.fail("Kafka", err)
	}
	if r.retired, err = readRetirements(sctx, admin, opts, r.retiredTopic, cfg.DLQTopic, r.dlqID); err != nil {
		return r.fail("Kafka", err)
	}
	// What is left of each partition as of now: from the group's offset
	// (or the start) to the end.
	from, left := map[int32]kgo.Offset{}, map[int32]bool{}
	for p, s := range start {
		pos := s
		if c, ok := committed[p]; ok && c > s {
			pos = c
		}
		from[p] = kgo.NewOffset().At(pos)
		if pos < end[p] {
			left[p] = true
		}
	}
	r.log.Info("dlq redrive", "version", version, "dlq_topic", cfg.DLQTopic, "group", r.group, "dry_run", r.rf.dryRun, "follow", r.rf.follow,
		"letters_left", fmt.Sprint(left), "end_offsets", fmt.Sprint(end))
	if len(left) == 0 && !r.rf.follow {
		return r.summary(nil)
	}

	var revoked sync.Map // partitions this member lost: nothing left of them for it
	var assigned atomic.Bool
	assigned.Store(r.rf.dryRun) // a dry run reads the partitions directly
	consume := []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500 * time.Millisecond)}
	if r.rf.dryRun {
		// A dry run joins no group: it must not take partitions from a
		// redrive that is running.
		consume = append(consume, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.DLQTopic: from}))
	} else {
		consume = append(consume, kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(cfg.DLQTopic), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			// A member that died (kill -9) holds its partitions until its
			// session times out: keep that short for the next run.
			kgo.SessionTimeout(redriveSession),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned.Store(true) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
				for _, p := range lost[cfg.DLQTopic] {
					revoked.Store(p, true)
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
				for _, p := range lost[cfg.DLQTopic] {
					revoked.Store(p, true)
				}
			}))
		if r.rf.follow {
			consume = append(consume, kgo.MetadataMaxAge(10*time.Second))
		}
	}
	cl, err := kgo.NewClient(append(opts, consume...)...)
	if err != nil {
		return r.fail("Kafka", err)
	}
	// Leaving the group waits for a rebalance that a poll blocked: allow it.
	defer cl.CloseAllowingRebalance()

	held := map[int32]bool{}
	var runErr error
	for {
		for p := range left {
			if _, gone := revoked.Load(p); gone {
				delete(left, p)
			}
		}
		if len(left) == 0 && !r.rf.follow {
			break
		}
		if ctx.Err() != nil {
			break
		}
		// Until the group assigns partitions (a dead member's session must
		// time out first), wait longer than for the next record.
		joined := assigned.Load()
		wait := dlqIdle
		if !joined {
			wait = redriveJoin
		}
		var pctx context.Context
		var pcancel context.CancelFunc
		if r.rf.follow {
			pctx, pcancel = context.WithCancel(ctx)
		} else {
			pctx, pcancel = context.WithTimeout(ctx, wait)
		}
		fetches := cl.PollRecords(pctx, redriveBatch)
		pcancel()
		if ctx.Err() != nil {
			break
		}
		if err := fetchError(fetches); err != nil {
			runErr = err
			break
		}
		if fetches.NumRecords() == 0 && !r.rf.follow {
			if !joined && !assigned.Load() {
				runErr = fmt.Errorf("group %s assigned this member no partition of %s within %s: another member holds them (is a redrive of the same group running?)", r.group, cfg.DLQTopic, redriveJoin)
			}
			break // what is left is control records (transaction markers)
		}
		var batch []*kgo.Record
		fetches.EachRecord(func(rec *kgo.Record) {
			p := rec.Partition
			if held[p] {
				return
			}
			if !r.rf.follow && (!left[p] || rec.Offset >= end[p]) {
				return // past the end as of the start: the next run's
			}
			if r.rf.follow && rec.Offset >= end[p] && r.mine[mineKey(letterOf(rec))] {
				// A letter this run appended: going on would take it round
				// again. The next run starts here.
				held[p] = true
				cl.PauseFetchPartitions(map[string][]int32{cfg.DLQTopic: {p}})
				r.log.Info("reached a letter this run re-appended: not reading this partition further; the next run starts at it",
					"partition", p, "offset", rec.Offset)
				return
			}
			batch = append(batch, rec)
			if rec.Offset+1 >= end[p] {
				delete(left, p)
			}
		})
		if err := r.batch(ctx, cl, batch); err != nil {
			runErr = err
			break
		}
		if !r.rf.dryRun {
			cl.AllowRebalance()
		}
	}
	if runErr == nil && ctx.Err() != nil && !r.rf.follow {
		runErr = errors.New("interrupted by a signal")
	}
	if runErr != nil {
		r.summary(runErr)
		return r.fail("", runErr)
	}
	return r.summary(nil)
}

// setup reads the schemas, the catalog of the outbox tables and builds
// today's row → record step and the publisher session.
func (r *redriver) setup(ctx context.Context) (int, bool) {
	cfg := r.cfg
	// A dry run registers nothing: it looks the schemas up.
	su, err := relaypkg.NewSetup(cfg, r.log, r.rf.dryRun)
	if err != nil {
		fmt.Fprintf(r.stderr, "cdc-relay: %v\n", err)
		return exitConfig, false
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := relaypkg.ConnectOutbox(setupCtx, cfg.PGURL)
	if err != nil {
		return r.fail("PostgreSQL", err), false
	}
	defer conn.Close(context.Background())
	in, err := relaypkg.Inspect(setupCtx, conn, cfg)
	if err != nil {
		return r.fail("read the catalog", err), false
	}
	if r.builder, err = su.NewBuilder(in); err != nil {
		return r.fail("", err), false
	}
	extra := r.builder.ExtraColumns()
	r.tables, r.relations = map[string]tableTypes{}, map[string]recordpkg.Relation{}
	for _, info := range in.Tables {
		tt, err := catalogTypes(setupCtx, conn, info, extra)
		if err != nil {
			return r.fail("read the catalog", err), false
		}
		r.tables[info.Name] = tt
		r.relations[tt.rel.Schema+"."+tt.rel.Name] = tt.rel
	}
	// The decoder of the relay's stream: messages, and the rows of
	// unconfigured_table letters whose table is now configured.
	r.dec = decoder.NewDecoder(decoder.Config{Tables: cfg.Tables, MessagePrefix: redrivePrefix, Extra: extra})
	if err := su.Preflight(setupCtx); err != nil {
		return r.fail("schema registry", err), false
	}
	if r.rf.dryRun {
		return 0, true
	}
	pub, err := su.NewPublisher(r.rejected, nil)
	if err != nil {
		fmt.Fprintf(r.stderr, "cdc-relay: %v\n", err)
		return exitConfig, false
	}
	r.sess = pub.NewSession(context.WithoutCancel(ctx), nopAcker{})
	return 0, true
}

// catalogTypes reads the type oids and modifiers of the extra columns of
// one outbox table, as its Relation message would carry them.
func catalogTypes(ctx context.Context, conn *pgx.Conn, info replication.TableInfo, extra []string) (tableTypes, error) {
	mods, err := relaypkg.Typmods(ctx, conn, info.OID)
	if err != nil {
		return tableTypes{}, err
	}
	tt := tableTypes{oid: info.OID, types: make([]uint32, len(extra)), mods: make([]int32, len(extra))}
	for i, name := range extra {
		tt.types[i], tt.mods[i] = info.Columns[name].TypeOID, mods[name]
	}
	tt.rel = recordpkg.Relation{OID: info.OID, Types: map[string]recordpkg.ColumnType{}}
	if err := conn.QueryRow(ctx, `SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = $1::int8::oid`, int64(info.OID)).Scan(&tt.rel.Schema, &tt.rel.Name); err != nil {
		return tableTypes{}, fmt.Errorf("read the name of table %s: %w", info.Name, err)
	}
	for name, c := range info.Columns {
		tt.rel.Types[name] = recordpkg.ColumnType{OID: c.TypeOID, Typmod: mods[name]}
	}
	return tt, nil
}

// nopAcker: redrive waits for each batch with Drain.
type nopAcker struct{}

func (nopAcker) Ack(uint64, int, int64) {}

// mineKey identifies a letter this run appended: its id and attempts.
func mineKey(l *recordpkg.Letter) string { return letterKey(l, l.Attempts()) }

// letterKey is mineKey of letter l with attempts: its id header, or for a
// letter without one (unconfigured_table) a hash of its value and table.
func letterKey(l *recordpkg.Letter, attempts int) string {
	id, _ := l.Header(router.HeaderID)
	key := string(id)
	if len(id) == 0 {
		h := fnv.New64a()
		table, _ := l.Header(recordpkg.HeaderTable)
		h.Write(table)
		h.Write([]byte{0})
		h.Write(l.Value)
		key = "\x00" + strconv.FormatUint(h.Sum64(), 16)
	}
	return key + "\x00" + strconv.Itoa(attempts)
}

// batch builds and hands over one poll's letters, waits until Kafka
// acknowledged every record they became, then commits their offsets.
func (r *redriver) batch(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	items := make([]*redriveItem, 0, len(recs))
	var err error
	for _, src := range recs {
		var it *redriveItem
		if it, err = r.letter(ctx, src); err != nil {
			break
		}
		items = append(items, it)
	}
	if r.rf.dryRun {
		for _, it := range items {
			fmt.Fprintln(r.stdout, "would be "+it.String())
			r.counts[it.outcome]++
		}
		return err
	}
	// What was handed over is acknowledged and committed even after a
	// failure to build the next letter; a failure to drain commits none
	// of the batch (its letters come again: at least once).
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ShutdownTimeout+time.Minute)
	defer cancel()
	if derr := r.sess.Drain(dctx); derr != nil {
		return fmt.Errorf("wait for Kafka: %w", derr)
	}
	done := make([]*kgo.Record, len(items))
	for i, it := range items {
		done[i] = it.src
	}
	if cerr := cl.CommitRecords(dctx, done...); cerr != nil {
		return fmt.Errorf("commit the offsets of group %s: %w", r.group, cerr)
	}
	r.mu.Lock()
	for _, it := range items {
		delete(r.items, it.seq)
		fmt.Fprintln(r.stdout, it.String())
		r.counts[it.outcome]++
		if it.outcome == outFailing || it.outcome == outFiltered || it.outcome == outSkipped {
			r.mine[it.key()] = true
		}
	}
	r.mu.Unlock()
	return err
}

// key is mineKey of the letter this item appended.
func (it *redriveItem) key() string {
	l := letterOf(it.src)
	a := it.attempt
	if it.outcome == outFiltered || it.outcome == outSkipped {
		a = l.Attempts()
	}
	if it.outcome == outFailing && len(it.rowID) > 0 {
		// An unconfigured_table letter built again: its new letter has the
		// row's id.
		return string(it.rowID) + "\x00" + strconv.Itoa(a)
	}
	return letterKey(l, a)
}

// letter decides what becomes of one dead letter and, unless a dry run,
// hands the record it becomes to the session.
func (r *redriver) letter(ctx context.Context, src *kgo.Record) (*redriveItem, error) {
	l := letterOf(src)
	id, _ := l.Header(router.HeaderID)
	it := &redriveItem{src: src, id: relaypkg.Token(id)}
	if ret, ok := r.retired[retiredKey(r.cfg.DLQTopic, r.dlqID, src.Partition, src.Offset)]; ok {
		// Before the filters: a retired letter is never re-appended.
		it.outcome, it.reason = outRetired, ret.Reason
		return it, nil
	}
	if why := r.rf.filtered(l); why != "" {
		it.outcome, it.reason, it.topic = outFiltered, why, r.cfg.DLQTopic
		if r.rf.dryRun {
			return it, nil
		}
		rec := copyLetter(src, r.cfg.DLQTopic)
		return it, r.enqueue(it, rec)
	}
	var rb *recordpkg.Rebuilt
	var err error
	if l.Kind() == recordpkg.ReasonUnconfigured {
		rb, err = r.unconfiguredRow(l)
	} else if rb, err = recordpkg.Rebuild(l, r.builder.ExtraColumns(), r.dec, redrivePrefix); err == nil && !rb.Row.Message {
		err = recordpkg.LetterTable(rb, relaypkg.TableNames(r.cfg.Tables))
		if tt, ok := r.tables[rb.Table]; ok {
			rb.Row.RelationID, rb.Row.ExtraTypes, rb.Row.ExtraTypmods = tt.oid, tt.types, tt.mods
		} else if err == nil {
			err = fmt.Errorf("%w: the table of the letter is not known", recordpkg.ErrNotRedrivable)
		}
	}
	if err != nil {
		// Appended again unchanged, so that it stays pending (dlq stats)
		// until a run builds it or dlq retire retires it.
		it.outcome, it.reason, it.topic = outSkipped, err.Error()+"; re-appended unchanged: pending until it is built or retired (cdc-relay dlq retire)", r.cfg.DLQTopic
		r.log.Warn("dead letter skipped: it cannot be built again; it is appended again unchanged and stays pending until a redrive builds it or dlq retire retires it", "partition", src.Partition, "offset", src.Offset, "id", it.id, "reason", err.Error())
		if r.rf.dryRun {
			return it, nil
		}
		return it, r.enqueue(it, copyLetter(src, r.cfg.DLQTopic))
	}
	if l.Kind() == recordpkg.ReasonUnconfigured {
		it.id, it.rowKey, it.rowID = relaypkg.Token(rb.Row.ID), rb.Row.AggregateID, rb.Row.ID
	}
	rec := publisher.NewRecord()
	inv, err := r.builder.Build(ctx, rec, rb.CommitTime, &rb.Row)
	if err != nil {
		publisher.Release(rec)
		return nil, fmt.Errorf("build the record of dead letter id=%s (partition %d offset %d): %w", it.id, src.Partition, src.Offset, err)
	}
	it.topic = rec.Topic
	if inv == nil {
		it.outcome = outRedriven
	} else {
		it.outcome, it.kind, it.reason, it.attempt = outFailing, inv.Kind, inv.Reason, l.Attempts()+1
		rec.Headers = withAttempts(rec.Headers, it.attempt)
	}
	if r.rf.dryRun {
		publisher.Release(rec)
		return it, nil
	}
	return it, r.enqueue(it, rec)
}

// enqueue hands rec to the session, remembering it for Reject.
func (r *redriver) enqueue(it *redriveItem, rec *publisher.Record) error {
	r.seq++
	it.seq, rec.Seq = r.seq, r.seq
	r.mu.Lock()
	r.items[it.seq] = it
	r.mu.Unlock()
	return r.sess.Enqueue(rec)
}

// rejected is the publisher's Reject: the broker refused a record (too
// large for its topic, or its timestamp). The letter is re-appended as it
// was read, with redrive_attempts one higher and the broker's reason, so
// that nothing of it is lost.
func (r *redriver) rejected(rec *publisher.Record, err error) (*publisher.Record, error) {
	r.mu.Lock()
	it := r.items[rec.Seq]
	r.mu.Unlock()
	if it == nil {
		return nil, fmt.Errorf("the broker refused a record redrive does not know: %w", err)
	}
	_, inv := recordpkg.Rejected(r.cfg.DLQTopic, rec, err)
	dl := copyLetter(it.src, r.cfg.DLQTopic)
	r.mu.Lock()
	it.outcome, it.topic, it.kind, it.reason = outFailing, r.cfg.DLQTopic, inv.Kind, inv.Reason
	it.attempt = letterOf(it.src).Attempts() + 1
	r.mu.Unlock()
	hs := dl.Headers[:0:0]
	for _, h := range dl.Headers {
		if h.Key != recordpkg.HeaderErrorKind && h.Key != recordpkg.HeaderError && h.Key != recordpkg.HeaderRedriveAttempts {
			hs = append(hs, h)
		}
	}
	hs = withAttempts(hs, it.attempt)
	hs = appendHeader(hs, recordpkg.HeaderErrorKind, []byte(inv.Kind))
	dl.Headers = appendHeader(hs, recordpkg.HeaderError, []byte(inv.Reason))
	dl.Seq, dl.Reserved = rec.Seq, rec.Reserved
	return dl, nil
}

// copyLetter is a dead letter as it was read, for topic.
func copyLetter(src *kgo.Record, topic string) *publisher.Record {
	rec := publisher.NewRecord()
	rec.Topic, rec.Time = topic, src.Timestamp
	rec.Key, rec.Value = src.Key, src.Value
	for _, h := range src.Headers {
		rec.Headers = appendHeader(rec.Headers, h.Key, h.Value)
	}
	return rec
}

// withAttempts sets the redrive_attempts header to n: in the place of an
// existing one, else just before outbox_row (or at the end).
func withAttempts[H ~kafkaHeader](hs []H, n int) []H {
	v := []byte(strconv.Itoa(n))
	at := len(hs)
	for i := range hs {
		switch h := kafkaHeader(hs[i]); h.Key {
		case recordpkg.HeaderRedriveAttempts:
			hs[i] = H{Key: h.Key, Value: v}
			return hs
		case recordpkg.HeaderRow:
			at = i
		}
	}
	return slices.Insert(hs, at, H{Key: recordpkg.HeaderRedriveAttempts, Value: v})
}

// kafkaHeader is a header's key and value.
type kafkaHeader = struct {
	Key   string
	Value []byte
}

// appendHeader appends one header to hs, whatever the publisher's header
// type, as long as it is a key and a value.
func appendHeader[H ~kafkaHeader](hs []H, key string, value []byte) []H {
	return append(hs, H{Key: key, Value: value})
}

// summary prints the summary line and returns the exit code: 0 when
// nothing still fails.
func (r *redriver) summary(err error) int {
	c := r.counts
	skipped := c[outFiltered] + c[outSkipped] + c[outRetired]
	prefix := "redrive"
	switch {
	case r.rf.dryRun:
		prefix = "dry run: would have"
	case err != nil:
		prefix = "redrive incomplete"
	}
	retired := ""
	if c[outRetired] > 0 {
		retired = fmt.Sprintf(", %d retired", c[outRetired])
	}
	fmt.Fprintf(r.stdout, "%s: redriven %d, still failing %d, skipped %d (%d left out by the filters and re-appended, %d that cannot be built again%s) from %s, group %s\n",
		prefix, c[outRedriven], c[outFailing], skipped, c[outFiltered], c[outSkipped], retired, r.cfg.DLQTopic, r.group)
	if c[outFailing] > 0 {
		return exitFailed
	}
	return exitOK
}

// unconfiguredRow is the row of an unconfigured_table letter, built as a
// live insert into its table would be, now that the table is configured.
func (r *redriver) unconfiguredRow(l *recordpkg.Letter) (*recordpkg.Rebuilt, error) {
	ur, err := recordpkg.LetterUnconfigured(l)
	if err != nil {
		return nil, err
	}
	notConfigured := fmt.Errorf("%w: its table %s is not a configured outbox table: add it to --table first (for dlq redrive, and for run so that new rows are events), then run cdc-relay dlq redrive again", recordpkg.ErrNotRedrivable, ur.Table)
	rel, ok := r.relations[ur.Table]
	if !ok {
		return nil, notConfigured
	}
	rb, ok, err := recordpkg.RebuildUnconfigured(l, ur, r.dec, rel)
	if err == nil && !ok {
		err = notConfigured
	}
	return rb, err
}
