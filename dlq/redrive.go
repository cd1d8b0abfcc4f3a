package dlq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

// RedriveBatch is how many letters one poll takes: they are built,
// produced, acknowledged and then committed together, so a kill repeats at
// most this many.
const RedriveBatch = 100

// redriveSession is the group session timeout: how long a redrive that
// died keeps its partitions from the next run.
const redriveSession = 10 * time.Second

// redriveJoin bounds the wait for the group to assign partitions.
const redriveJoin = 2 * time.Minute

// redrivePrefix is the message prefix of the pgoutput message a
// message's dead letter is decoded from again (any prefix would do: the
// decoder is redrive's own).
const redrivePrefix = "redrive"

// Filters are the action flags of dlq redrive and dlq retire, read from
// the command line only: --dry-run, --follow (redrive) and the filters,
// each with whether it was given.
type Filters struct {
	DryRun, Follow      bool
	ID, EventType, Kind string    // --id, --event-type, --kind
	Since               time.Time // --since
	HasID, HasEventType bool
	HasKind, HasSince   bool
}

// filtered says why the filters leave letter l out, "" when they keep it.
func (rf *Filters) filtered(l *recordpkg.Letter) string {
	header := func(key string) string { v, _ := l.Header(key); return string(v) }
	switch {
	case rf.HasID && header(router.HeaderID) != rf.ID:
		return "--id"
	case rf.HasEventType && header(router.HeaderEventType) != rf.EventType:
		return "--event-type"
	case rf.HasKind && l.Kind() != rf.Kind:
		return "--kind"
	case rf.HasSince && l.Time.Before(rf.Since):
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
		return fmt.Sprintf("redriven id=%s topic=%s key=%s %s", it.id, it.topic, relay.Token(key), where)
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
	cfg            *relay.Config
	rf             Filters
	group          string
	retiredTopic   string
	log            *slog.Logger
	stdout, stderr io.Writer

	step *rowStep
	sess *publisher.Session

	mu    sync.Mutex
	items map[uint64]*redriveItem // the batch in flight, by seq (Reject)

	seq    uint64
	counts [5]int
	// retired are the retirements of the DLQ's letters (dlq retire), by
	// retiredKey, as of the start.
	retired map[string]Retirement
	dlqID   [16]byte
	mine    map[string]bool // follow: id and attempts of the letters this run appended
}

// RedriveOptions are what one dlq redrive runs with.
type RedriveOptions struct {
	Config       *relay.Config
	Filters      Filters
	Group        string // --group: the consumer group whose offsets mark what is done
	RetiredTopic string // --dlq-retired-topic: retired letters are skipped
	Log          *slog.Logger
	// Stdout gets a line per letter and the summary; Stderr the failure.
	Stdout, Stderr io.Writer
}

// Redrive sends the dead letters of o.Config.DLQTopic on through today's
// row → record step, in the consumer group o.Group, and returns the exit
// code of the command (relay.ExitOK, ExitConfig, ExitFailed).
func Redrive(ctx context.Context, o RedriveOptions) int {
	r := &redriver{cfg: o.Config, rf: o.Filters, group: o.Group, retiredTopic: o.RetiredTopic, log: o.Log, stdout: o.Stdout, stderr: o.Stderr,
		items: map[uint64]*redriveItem{}, mine: map[string]bool{}}
	return r.run(ctx)
}

// fail reports err in one line and returns its exit code (relay.FailExit).
func (r *redriver) fail(what string, err error) int {
	return relay.FailExit(r.stderr, "cdc-relay dlq redrive failed: ", what, err)
}

func (r *redriver) run(ctx context.Context) int {
	cfg := r.cfg
	if code, ok := r.setup(ctx); !ok {
		return code
	}
	opts, err := kafkaOptions(cfg)
	if err != nil {
		return r.fail("", err)
	}
	admin, err := connect(opts)
	if err != nil {
		return r.fail("Kafka", err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start, err := listOffsets(sctx, adm, cfg.DLQTopic, -2)
	if errors.Is(err, errNoTopic) && !r.rf.Follow {
		fmt.Fprintf(r.stdout, "redrive: %s does not exist, nothing to redrive; redriven 0, still failing 0, skipped 0\n", cfg.DLQTopic)
		return relay.ExitOK
	}
	if err != nil {
		return r.fail("Kafka", err)
	}
	end, err := listOffsets(sctx, adm, cfg.DLQTopic, -1)
	if err != nil {
		return r.fail("Kafka", err)
	}
	committed, err := committedOffsets(sctx, adm, r.group, cfg.DLQTopic)
	if err != nil {
		return r.fail("Kafka", err)
	}
	if r.dlqID, err = topicID(sctx, adm, cfg.DLQTopic); err != nil {
		return r.fail("Kafka", err)
	}
	if r.retired, err = readRetirements(sctx, adm, opts, r.retiredTopic, cfg.DLQTopic, r.dlqID); err != nil {
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
	r.log.Info("dlq redrive", "version", relay.Version, "dlq_topic", cfg.DLQTopic, "group", r.group, "dry_run", r.rf.DryRun, "follow", r.rf.Follow,
		"letters_left", fmt.Sprint(left), "end_offsets", fmt.Sprint(end))
	if len(left) == 0 && !r.rf.Follow {
		return r.summary(nil)
	}

	var revoked sync.Map // partitions this member lost: nothing left of them for it
	var assigned atomic.Bool
	assigned.Store(r.rf.DryRun) // a dry run reads the partitions directly
	consume := []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500 * time.Millisecond)}
	if r.rf.DryRun {
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
		if r.rf.Follow {
			consume = append(consume, kgo.MetadataMaxAge(10*time.Second))
		}
	}
	cl, err := connect(opts, consume...)
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
		if len(left) == 0 && !r.rf.Follow {
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
		if r.rf.Follow {
			pctx, pcancel = context.WithCancel(ctx)
		} else {
			pctx, pcancel = context.WithTimeout(ctx, wait)
		}
		fetches := cl.PollRecords(pctx, RedriveBatch)
		pcancel()
		if ctx.Err() != nil {
			break
		}
		if err := fetchError(fetches); err != nil {
			runErr = err
			break
		}
		if fetches.NumRecords() == 0 && !r.rf.Follow {
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
			if !r.rf.Follow && (!left[p] || rec.Offset >= end[p]) {
				return // past the end as of the start: the next run's
			}
			if r.rf.Follow && rec.Offset >= end[p] && r.mine[mineKey(letterOf(rec))] {
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
		if !r.rf.DryRun {
			cl.AllowRebalance()
		}
	}
	if runErr == nil && ctx.Err() != nil && !r.rf.Follow {
		runErr = errors.New("interrupted by a signal")
	}
	if runErr != nil {
		r.summary(runErr)
		return r.fail("", runErr)
	}
	return r.summary(nil)
}

// setup builds today's row → record step and the publisher session.
func (r *redriver) setup(ctx context.Context) (int, bool) {
	// A dry run registers nothing: it looks the schemas up.
	step, code, ok := newRowStep(ctx, r.cfg, r.log, r.rf.DryRun, r.stderr)
	if !ok {
		return code, false
	}
	r.step = step
	if r.rf.DryRun {
		return 0, true
	}
	pub, err := step.su.NewPublisher(r.rejected, nil, nil)
	if err != nil {
		fmt.Fprintf(r.stderr, "cdc-relay: %v\n", err)
		return relay.ExitConfig, false
	}
	r.sess = pub.NewSession(context.WithoutCancel(ctx), nopAcker{})
	return 0, true
}
