package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
	"github.com/cdc-relay/cdc-relay/internal/config"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// `cdc-relay tail`: read topics the relay writes, as a consumer sees them.
// A direct consumer (no group, so nothing is committed) of exact partitions
// and offsets, resolved up front, so that without --follow it knows where
// each partition ended when it started and stops there.

// Where tail starts reading.
const (
	tailFromEnd = iota
	tailFromBeginning
	tailFromTime
	tailFromOffsets
)

// tailStartNames name the starts in tail's log.
var tailStartNames = [...]string{tailFromEnd: "end", tailFromBeginning: "beginning", tailFromTime: "since", tailFromOffsets: "offset"}

// tailSetupTimeout bounds each request tail makes before reading (listing
// topics and offsets) and each schema lookup.
const tailSetupTimeout = 30 * time.Second

// tailRefreshInterval is how often --follow looks for new topics and
// partitions.
const tailRefreshInterval = 5 * time.Second

// tailOptions are tail's resolved settings and action flags.
type tailOptions struct {
	cfg       *Config // the Kafka and registry settings
	topics    []string
	match     *regexp.Regexp // without TOPIC: the template's topics and the DLQ
	start     int
	since     time.Time
	offsets   map[int32]int64 // --offset: partition → first offset
	count     int64           // 0: no limit
	follow    bool
	pretty    bool
	keyFormat recordpkg.KeyFormat
}

// tailCommand is `cdc-relay tail`.
func tailCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	v, code, ok := loadValues(config.Tail, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	o, err := newTailOptions(v, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return exitConfig
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := runTail(ctx, o, stdout, log); err != nil {
		var cerr *ConfigError
		if errors.As(err, &cerr) {
			fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
			return exitConfig
		}
		fmt.Fprintf(stderr, "cdc-relay: tail failed: %s\n", Redact(err.Error()))
		return exitFailed
	}
	return exitOK
}

// newTailOptions checks tail's settings, arguments and action flags.
func newTailOptions(v *config.Values, now time.Time) (*tailOptions, error) {
	c := &Config{
		KafkaBrokers:      v.List("kafka-brokers"),
		SchemaRegistryURL: v.String("schema-registry-url"),
		RegistryCAFile:    v.String("schema-registry-ca-file"),
		TopicTemplate:     v.String("topic-template"),
		DLQTopic:          v.String("dlq-topic"),
	}
	if err := kafkaSecurity(c, v); err != nil {
		return nil, err
	}
	if c.RegistryCAFile != "" {
		if _, err := os.Stat(c.RegistryCAFile); err != nil {
			return nil, cfgErr("schema-registry-ca-file", "%v", err)
		}
	}
	o := &tailOptions{cfg: c, topics: v.Args(), pretty: v.ActionBool("pretty")}
	var err error
	if o.keyFormat, err = recordpkg.ParseKeyFormat(v.String("key-format")); err != nil {
		return nil, cfgErr("key-format", "%v", err)
	}
	for _, t := range o.topics {
		if err := router.ValidTopic(t); err != nil {
			return nil, &ConfigError{Msg: fmt.Sprintf("topic argument %q: %v", t, err)}
		}
	}
	if len(o.topics) == 0 {
		if _, err := router.New(c.TopicTemplate); err != nil {
			return nil, &ConfigError{Msg: err.Error()}
		}
		if err := router.ValidTopic(c.DLQTopic); err != nil {
			return nil, cfgErr("dlq-topic", "%v", err)
		}
		o.match = templateRegexp(c.TopicTemplate, c.DLQTopic)
	}
	var starts []string
	if v.ActionBool("from-beginning") {
		o.start = tailFromBeginning
		starts = append(starts, "--from-beginning")
	}
	if s, given := v.Action("since"); given {
		if o.since, err = parseReplayTime("since", strings.TrimSpace(s), now); err != nil {
			return nil, err
		}
		o.start = tailFromTime
		starts = append(starts, "--since")
	}
	if s, given := v.Action("offset"); given {
		if o.offsets, err = parseTailOffsets(s); err != nil {
			return nil, err
		}
		o.start = tailFromOffsets
		starts = append(starts, "--offset")
	}
	if len(starts) > 1 {
		return nil, cfgErr(strings.TrimPrefix(starts[1], "--"), "cannot be given with %s: choose where to start", starts[0])
	}
	if s, given := v.Action("count"); given {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 1 {
			return nil, cfgErr("count", "%q is not a whole number of at least 1", s)
		}
		o.count = n
	}
	// From the end there is nothing to print but what arrives: follow,
	// unless --follow false says otherwise.
	_, followGiven := v.Action("follow")
	o.follow = v.ActionBool("follow") || (!followGiven && o.start == tailFromEnd)
	return o, nil
}

// parseTailOffsets reads --offset P:O[,P:O...].
func parseTailOffsets(s string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		ps, offs, ok := strings.Cut(item, ":")
		p, perr := strconv.ParseInt(ps, 10, 32)
		off, oerr := strconv.ParseInt(offs, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || off < 0 {
			return nil, cfgErr("offset", "%q is not PARTITION:OFFSET, e.g. 0:42 (several: 0:42,2:7)", item)
		}
		if _, dup := out[int32(p)]; dup {
			return nil, cfgErr("offset", "partition %d is given twice", p)
		}
		out[int32(p)] = off
	}
	return out, nil
}

// templateRegexp matches the topics template can name (a placeholder is
// one or more of Kafka's topic characters) and the DLQ topic.
func templateRegexp(template, dlq string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^(?:")
	rest := template
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]))
		j := strings.IndexByte(rest[i:], '}') // router.New checked it is closed
		b.WriteString(`[A-Za-z0-9._-]+`)
		rest = rest[i+j+1:]
	}
	b.WriteString(")$|^" + regexp.QuoteMeta(dlq) + "$")
	return regexp.MustCompile(b.String())
}

// tailer is one run of tail.
type tailer struct {
	o   *tailOptions
	cl  *kgo.Client
	log *slog.Logger

	mu    sync.Mutex
	known map[string]map[int32]bool // partitions being read
}

func runTail(ctx context.Context, o *tailOptions, stdout io.Writer, log *slog.Logger) error {
	sec, err := kgoSecurity(o.cfg)
	if err != nil {
		return err
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(o.cfg.KafkaBrokers...),
		kgo.ClientID("cdc-relay-tail"),
		// What consumers see: committed records only. Control records are
		// kept so that an end offset that is a transaction marker is
		// reached too; they are never printed.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		// An offset below the log start (deleted by retention) reads from
		// the start.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, sec...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("create Kafka client: %w", err)
	}
	defer cl.Close()
	var lookup func(context.Context, int) (*schemaregistry.WriterSchema, error)
	if o.cfg.SchemaRegistryURL != "" {
		hc, err := registryHTTPClient(o.cfg)
		if err != nil {
			return cfgErr("schema-registry-ca-file", "%v", err)
		}
		reg, err := schemaregistry.New(schemaregistry.Config{URL: o.cfg.SchemaRegistryURL, Strategy: schemaregistry.TopicRecord, HTTPClient: hc, Logger: log})
		if err != nil {
			return cfgErr("schema-registry-url", "%v", err)
		}
		lookup = func(ctx context.Context, id int) (*schemaregistry.WriterSchema, error) {
			ctx, cancel := context.WithTimeout(ctx, tailSetupTimeout)
			defer cancel()
			return reg.SchemaByID(ctx, id)
		}
	}
	t := &tailer{o: o, cl: cl, log: log, known: map[string]map[int32]bool{}}
	return t.run(ctx, stdout, newTailFormatter(o.keyFormat, lookup, log))
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

func (t *tailer) run(ctx context.Context, stdout io.Writer, f *tailFormatter) error {
	parts, err := t.partitions(ctx, true)
	if err != nil {
		return err
	}
	if len(parts) == 0 && !t.o.follow {
		t.log.Warn("no topic to read", "topics", t.describeTopics())
		return nil
	}
	var ends map[tp]int64 // the end of each partition when tail started
	if len(parts) > 0 {
		if ends, err = t.listOffsets(ctx, parts, -1); err != nil {
			return err
		}
	}
	starts, err := t.startOffsets(ctx, parts, ends)
	if err != nil {
		return err
	}
	remaining := map[tp]bool{} // without --follow: partitions not yet read to their end
	add := map[string]map[int32]kgo.Offset{}
	for p, start := range starts {
		if !t.o.follow && start >= ends[p] {
			continue
		}
		remaining[p] = true
		if add[p.topic] == nil {
			add[p.topic] = map[int32]kgo.Offset{}
		}
		add[p.topic][p.partition] = kgo.NewOffset().At(start)
	}
	if !t.o.follow && len(remaining) == 0 {
		return nil
	}
	t.cl.AddConsumePartitions(add)
	t.log.Info("reading", "topics", t.describeTopics(), "partitions", len(remaining), "from", tailStartNames[t.o.start], "follow", t.o.follow)
	if t.o.follow {
		var wg sync.WaitGroup
		refreshCtx, cancel := context.WithCancel(ctx)
		wg.Add(1)
		go func() { defer wg.Done(); t.refresh(refreshCtx) }()
		defer func() { cancel(); wg.Wait() }()
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	var printed int64
	var line []byte
	for {
		fetches := t.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: what was printed stands
		}
		for _, fe := range fetches.Errors() {
			var loss *kgo.ErrDataLoss
			switch {
			case errors.Is(fe.Err, context.Canceled):
				return nil
			case errors.As(fe.Err, &loss), kerr.IsRetriable(fe.Err):
				t.log.Warn("fetch", "topic", fe.Topic, "partition", fe.Partition, "error", fe.Err)
			default:
				return fmt.Errorf("fetch %s partition %d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		var ferr error
		fetches.EachRecord(func(r *kgo.Record) {
			p := tp{r.Topic, r.Partition}
			if ferr != nil || (t.o.count > 0 && printed >= t.o.count) {
				return
			}
			end, bounded := ends[p]
			if !t.o.follow {
				if !remaining[p] || (bounded && r.Offset >= end) {
					return // past the end tail started at
				}
				if bounded && r.Offset >= end-1 {
					delete(remaining, p)
					t.cl.PauseFetchPartitions(map[string][]int32{p.topic: {p.partition}})
				}
			}
			if r.Attrs.IsControl() {
				return
			}
			line, ferr = f.appendLine(ctx, line[:0], r, t.o.pretty)
			if ferr != nil {
				return
			}
			out.Write(line)
			printed++
		})
		if err := out.Flush(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if ferr != nil {
			return ferr
		}
		if (t.o.count > 0 && printed >= t.o.count) || (!t.o.follow && len(remaining) == 0) {
			return nil
		}
	}
}

// describeTopics names what tail reads, for messages.
func (t *tailer) describeTopics() string {
	if len(t.o.topics) > 0 {
		return strings.Join(t.o.topics, ",")
	}
	return t.o.match.String()
}

// partitions lists the partitions to read that tail does not read yet, and
// marks them read. An explicit topic that does not exist is an error at
// the first listing (first), and waited for after it.
func (t *tailer) partitions(ctx context.Context, first bool) (map[string][]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, tailSetupTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range t.o.topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	out := map[string][]int32{}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, rt := range resp.Topics {
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			if first && len(t.o.topics) > 0 {
				if errors.Is(err, kerr.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("topic %s does not exist", name)
				}
				return nil, fmt.Errorf("topic %s: %w", name, err)
			}
			continue
		}
		if t.o.match != nil && (rt.IsInternal || !t.o.match.MatchString(name)) {
			continue
		}
		for _, p := range rt.Partitions {
			if t.o.offsets != nil {
				if _, chosen := t.o.offsets[p.Partition]; !chosen {
					continue
				}
			}
			if t.known[name][p.Partition] {
				continue
			}
			if t.known[name] == nil {
				t.known[name] = map[int32]bool{}
			}
			t.known[name][p.Partition] = true
			out[name] = append(out[name], p.Partition)
		}
	}
	if first && t.o.offsets != nil {
		for p := range t.o.offsets {
			for _, name := range t.o.topics {
				if !t.known[name][p] {
					return nil, cfgErr("offset", "topic %s has no partition %d", name, p)
				}
			}
		}
	}
	return out, nil
}

// listOffsets asks each partition's leader for the offset at timestamp:
// -1 the end (the last stable offset: what read_committed reads up to), -2
// the start, else the first record at or after it (the end when none is).
// Retriable errors (a new topic's leader not elected yet) are retried.
func (t *tailer) listOffsets(ctx context.Context, parts map[string][]int32, timestamp int64) (map[tp]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, tailSetupTimeout)
	defer cancel()
	var b backoff.Backoff
	for {
		out, err := t.listOffsetsOnce(ctx, parts, timestamp)
		if err == nil || !kerr.IsRetriable(err) {
			return out, err
		}
		if werr := b.Wait(ctx); werr != nil {
			return nil, err
		}
	}
}

func (t *tailer) listOffsetsOnce(ctx context.Context, parts map[string][]int32, timestamp int64) (map[tp]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = 1 // read_committed
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = name
		for _, p := range parts[name] {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, timestamp, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	out := map[tp]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets of %s partition %d: %w", rt.Topic, rp.Partition, err)
			}
			out[tp{rt.Topic, rp.Partition}] = rp.Offset
		}
	}
	return out, nil
}

// startOffsets resolves where each partition is read from; never past its
// end, so that an --offset beyond it waits for what comes.
func (t *tailer) startOffsets(ctx context.Context, parts map[string][]int32, ends map[tp]int64) (map[tp]int64, error) {
	starts := map[tp]int64{}
	var err error
	switch t.o.start {
	case tailFromEnd:
		for p, end := range ends {
			starts[p] = end
		}
	case tailFromBeginning:
		if len(parts) > 0 {
			starts, err = t.listOffsets(ctx, parts, -2)
		}
	case tailFromTime:
		if len(parts) > 0 {
			starts, err = t.listOffsets(ctx, parts, t.o.since.UnixMilli())
		}
	case tailFromOffsets:
		for p := range ends {
			starts[p] = t.o.offsets[p.partition]
		}
	}
	if err != nil {
		return nil, err
	}
	for p, s := range starts {
		if end := ends[p]; s < 0 || s > end {
			starts[p] = end
		}
	}
	return starts, nil
}

// refresh, with --follow, adds the partitions and topics that appear
// while tail runs, read from their start: everything in them is new.
func (t *tailer) refresh(ctx context.Context) {
	tick := time.NewTicker(tailRefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		parts, err := t.partitions(ctx, false)
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn("look for new topics", "error", err)
			}
			continue
		}
		add := map[string]map[int32]kgo.Offset{}
		for name, ps := range parts {
			add[name] = map[int32]kgo.Offset{}
			for _, p := range ps {
				add[name][p] = kgo.NewOffset().AtStart()
			}
		}
		if len(add) > 0 {
			t.log.Info("reading new partitions", "topics", len(add))
			t.cl.AddConsumePartitions(add)
		}
	}
}
