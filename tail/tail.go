package tail

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// `cdc-relay tail`: read topics the relay writes, as a consumer sees them.
// A direct consumer (no group, so nothing is committed) of exact partitions
// and offsets, resolved up front, so that without --follow it knows where
// each partition ended when it started and stops there.

// Start is where tail starts reading.
type Start int

// The starts.
const (
	FromEnd Start = iota
	FromBeginning
	FromTime
	FromOffsets
)

// startNames name the starts in tail's log.
var startNames = [...]string{FromEnd: "end", FromBeginning: "beginning", FromTime: "since", FromOffsets: "offset"}

// tailSetupTimeout bounds each request tail makes before reading (listing
// topics and offsets) and each schema lookup.
const tailSetupTimeout = 30 * time.Second

// tailRefreshInterval is how often --follow looks for new topics and
// partitions.
const tailRefreshInterval = 5 * time.Second

// Options are tail's resolved settings and action flags; the command line
// checks them.
type Options struct {
	Config    *relay.Config   // the Kafka and registry settings
	Topics    []string        // the TOPIC arguments
	Match     *regexp.Regexp  // without Topics: the template's topics and the DLQ (MatchTemplate)
	Start     Start           // FromEnd unless --from-beginning, --since or --offset
	Since     time.Time       // --since
	Offsets   map[int32]int64 // --offset: partition → first offset
	Count     int64           // --count; 0: no limit
	Follow    bool            // --follow
	Pretty    bool            // --pretty
	KeyFormat recordpkg.KeyFormat
}

// MatchTemplate matches the topics template can name (a placeholder is
// one or more of Kafka's topic characters) and the DLQ topic.
func MatchTemplate(template, dlq string) *regexp.Regexp {
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
	o   *Options
	cl  *kgo.Client
	adm *kadm.Client // cl's offset listings
	log *slog.Logger

	mu    sync.Mutex
	known map[string]map[int32]bool // partitions being read
}

// Run prints the records of o's topics on stdout as JSON lines, until
// the end of each partition as of the start or, with o.Follow, until ctx
// ends. An error of a setting is a *relay.ConfigError.
func Run(ctx context.Context, o *Options, stdout io.Writer, log *slog.Logger) error {
	opts, err := relay.KafkaOptions(o.Config)
	if err != nil {
		return err
	}
	opts = append(opts,
		kgo.ClientID("cdc-relay-tail"),
		// What consumers see: committed records only. Control records are
		// kept so that an end offset that is a transaction marker is
		// reached too; they are never printed.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		// An offset below the log start (deleted by retention) reads from
		// the start.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("create Kafka client: %w", err)
	}
	defer cl.Close()
	lookup, err := RegistryLookup(o.Config, log)
	if err != nil {
		return err
	}
	t := &tailer{o: o, cl: cl, adm: kadm.NewClient(cl), log: log, known: map[string]map[int32]bool{}}
	return t.run(ctx, stdout, newTailFormatter(o.KeyFormat, lookup, log))
}

// RegistryLookup is tail's lookup of writer schemas by id in the registry
// of cfg (its URL and CA file), each bounded by 30 s; nil without a
// registry. An error of a setting is a *relay.ConfigError.
func RegistryLookup(cfg *relay.Config, log *slog.Logger) (func(context.Context, int) (*schemaregistry.WriterSchema, error), error) {
	if cfg.SchemaRegistryURL == "" {
		return nil, nil
	}
	hc, err := relay.RegistryHTTPClient(cfg)
	if err != nil {
		return nil, relay.ConfigErr("schema-registry-ca-file", "%v", err)
	}
	reg, err := schemaregistry.New(schemaregistry.Config{URL: cfg.SchemaRegistryURL, Strategy: schemaregistry.TopicRecord, HTTPClient: hc, Logger: log})
	if err != nil {
		return nil, relay.ConfigErr("schema-registry-url", "%v", err)
	}
	return func(ctx context.Context, id int) (*schemaregistry.WriterSchema, error) {
		ctx, cancel := context.WithTimeout(ctx, tailSetupTimeout)
		defer cancel()
		return reg.SchemaByID(ctx, id)
	}, nil
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
	if len(parts) == 0 && !t.o.Follow {
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
		if !t.o.Follow && start >= ends[p] {
			continue
		}
		remaining[p] = true
		if add[p.topic] == nil {
			add[p.topic] = map[int32]kgo.Offset{}
		}
		add[p.topic][p.partition] = kgo.NewOffset().At(start)
	}
	if !t.o.Follow && len(remaining) == 0 {
		return nil
	}
	t.cl.AddConsumePartitions(add)
	t.log.Info("reading", "topics", t.describeTopics(), "partitions", len(remaining), "from", startNames[t.o.Start], "follow", t.o.Follow)
	if t.o.Follow {
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
			if ferr != nil || (t.o.Count > 0 && printed >= t.o.Count) {
				return
			}
			end, bounded := ends[p]
			if !t.o.Follow {
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
			line, ferr = f.appendLine(ctx, line[:0], r, t.o.Pretty)
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
		if (t.o.Count > 0 && printed >= t.o.Count) || (!t.o.Follow && len(remaining) == 0) {
			return nil
		}
	}
}

// describeTopics names what tail reads, for messages.
func (t *tailer) describeTopics() string {
	if len(t.o.Topics) > 0 {
		return strings.Join(t.o.Topics, ",")
	}
	return t.o.Match.String()
}

// partitions lists the partitions to read that tail does not read yet, and
// marks them read. An explicit topic that does not exist is an error at
// the first listing (first), and waited for after it.
func (t *tailer) partitions(ctx context.Context, first bool) (map[string][]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, tailSetupTimeout)
	defer cancel()
	// kmsg, not kadm.Metadata: that fails the whole listing on one topic's
	// authorization error (tail names the topic, --follow passes it by),
	// and may answer from a cache a few seconds old.
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range t.o.Topics {
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
			if first && len(t.o.Topics) > 0 {
				if errors.Is(err, kerr.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("topic %s does not exist", name)
				}
				return nil, fmt.Errorf("topic %s: %w", name, err)
			}
			continue
		}
		if t.o.Match != nil && (rt.IsInternal || !t.o.Match.MatchString(name)) {
			continue
		}
		for _, p := range rt.Partitions {
			if t.o.Offsets != nil {
				if _, chosen := t.o.Offsets[p.Partition]; !chosen {
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
	if first && t.o.Offsets != nil {
		for p := range t.o.Offsets {
			for _, name := range t.o.Topics {
				if !t.known[name][p] {
					return nil, relay.ConfigErr("offset", "topic %s has no partition %d", name, p)
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
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	sort.Strings(names)
	var listed kadm.ListedOffsets
	var err error
	switch timestamp {
	case -1:
		listed, err = t.adm.ListCommittedOffsets(ctx, names...) // read_committed
	case -2:
		listed, err = t.adm.ListStartOffsets(ctx, names...)
	default:
		// read_uncommitted: an offset past the last stable one is
		// brought back to the end by startOffsets.
		listed, err = t.adm.ListOffsetsAfterMilli(ctx, timestamp, names...)
	}
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && len(se.Errs) > 0 {
		err = se.Errs[0].Err // what the request alone fails with
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	out := map[tp]int64{}
	for _, name := range names {
		for _, p := range parts[name] {
			o, ok := listed.Lookup(name, p)
			if !ok {
				o, ok = listed.Lookup(name, -1) // kadm's place for the topic's own error
			}
			if !ok {
				o.Err = kerr.UnknownTopicOrPartition // not in the metadata (yet)
			}
			if o.Err != nil {
				return nil, fmt.Errorf("list offsets of %s partition %d: %w", name, p, o.Err)
			}
			out[tp{name, p}] = o.Offset
		}
	}
	return out, nil
}

// startOffsets resolves where each partition is read from; never past its
// end, so that an --offset beyond it waits for what comes.
func (t *tailer) startOffsets(ctx context.Context, parts map[string][]int32, ends map[tp]int64) (map[tp]int64, error) {
	starts := map[tp]int64{}
	var err error
	switch t.o.Start {
	case FromEnd:
		for p, end := range ends {
			starts[p] = end
		}
	case FromBeginning:
		if len(parts) > 0 {
			starts, err = t.listOffsets(ctx, parts, -2)
		}
	case FromTime:
		if len(parts) > 0 {
			starts, err = t.listOffsets(ctx, parts, t.o.Since.UnixMilli())
		}
	case FromOffsets:
		for p := range ends {
			starts[p] = t.o.Offsets[p.partition]
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
