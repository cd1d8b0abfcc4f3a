package dlq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

// dlqIdle is how long a read of the dead-letter topic waits for a record
// before it takes the rest of a partition's range for control records (the
// markers of Kafka transactions, which take offsets but are never
// returned), so that it ends.
const dlqIdle = 10 * time.Second

// ageBuckets are the ages dlq stats counts letters by, with their labels.
var ageBuckets = []struct {
	label string
	upTo  time.Duration
}{{"1h", time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}, {"older", 1<<63 - 1}}

// Counts is dlq stats' result.
type Counts struct {
	Topic   string `json:"topic"`
	Group   string `json:"group"`
	InTopic int    `json:"in_topic"`
	Pending int    `json:"pending"`
	// Retired counts the letters in the topic retired with dlq retire
	// (never pending), RetiredTopic is where their retirements are.
	Retired      int            `json:"retired"`
	RetiredTopic string         `json:"retired_topic"`
	Kinds        map[string]int `json:"error_kinds"`
	EventTypes   map[string]int `json:"event_types"`
	Ages         map[string]int `json:"ages"`
	Reappended   int            `json:"reappended"`
	// Positions is, with RabbitMQ, the stream of the tools' positions
	// (what was redriven or retired), in place of a group; Redriven counts
	// the letters redriven (never pending).
	Positions string     `json:"positions,omitempty"`
	Redriven  int        `json:"redriven,omitempty"`
	Oldest    *time.Time `json:"oldest,omitempty"`
	Newest    *time.Time `json:"newest,omitempty"`
}

func (c *Counts) add(l *recordpkg.Letter, now time.Time) {
	c.Pending++
	kind := l.Kind()
	if kind == "" {
		kind = "(none)"
	}
	c.Kinds[kind]++
	et, _ := l.Header(router.HeaderEventType)
	name := string(et)
	if name == "" {
		name = "(none)"
	}
	c.EventTypes[name]++
	age := now.Sub(l.Time)
	for _, b := range ageBuckets {
		if age < b.upTo {
			c.Ages[b.label]++
			break
		}
	}
	if l.Attempts() > 0 {
		c.Reappended++
	}
	ts := l.Time.UTC()
	if c.Oldest == nil || ts.Before(*c.Oldest) {
		c.Oldest = &ts
	}
	if c.Newest == nil || ts.After(*c.Newest) {
		c.Newest = &ts
	}
}

// countLetters reads the topic from its start to its end as of now and
// counts the letters at or after the group's committed offsets that are
// not retired (their retirements are in retiredTopic), and the retired
// ones.
func CountLetters(ctx context.Context, cfg *relay.Config, group, retiredTopic string, now time.Time) (*Counts, error) {
	counts := &Counts{Topic: cfg.DLQTopic, Group: group, RetiredTopic: retiredTopic, Kinds: map[string]int{}, EventTypes: map[string]int{}, Ages: map[string]int{}}
	opts, err := kafkaOptions(cfg)
	if err != nil {
		return nil, err
	}
	admin, err := connect(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Kafka: %w", err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	start, err := listOffsets(ctx, adm, cfg.DLQTopic, -2)
	if errors.Is(err, errNoTopic) {
		return counts, nil // nothing was ever dead-lettered
	}
	if err != nil {
		return nil, err
	}
	end, err := listOffsets(ctx, adm, cfg.DLQTopic, -1)
	if err != nil {
		return nil, err
	}
	committed, err := committedOffsets(ctx, adm, group, cfg.DLQTopic)
	if err != nil {
		return nil, err
	}
	id, err := topicID(ctx, adm, cfg.DLQTopic)
	if err != nil {
		return nil, err
	}
	retired, err := readRetirements(ctx, adm, opts, retiredTopic, cfg.DLQTopic, id)
	if err != nil {
		return nil, err
	}
	err = readRange(ctx, opts, cfg.DLQTopic, start, end, func(r *kgo.Record) {
		counts.InTopic++
		if _, ok := retired[retiredKey(cfg.DLQTopic, id, r.Partition, r.Offset)]; ok {
			counts.Retired++
			return
		}
		if c, ok := committed[r.Partition]; !ok || r.Offset >= c {
			counts.add(letterOf(r), now)
		}
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// fetchError is the first error of a poll that is not the poll's own
// deadline.
func fetchError(f kgo.Fetches) error {
	for _, e := range f.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, kgo.ErrClientClosed) {
			continue
		}
		return fmt.Errorf("read %s partition %d: %w", e.Topic, e.Partition, e.Err)
	}
	return nil
}

// printCounts prints the counts as a small table.
func PrintCounts(w io.Writer, c *Counts) {
	if c.Positions != "" {
		fmt.Fprintf(w, "%s: %d dead letters pending (%d in the stream; positions in %s)\n", c.Topic, c.Pending, c.InTopic, c.Positions)
		if c.Redriven > 0 {
			fmt.Fprintf(w, "redriven with cdc-relay dlq redrive: %d\n", c.Redriven)
		}
	} else {
		fmt.Fprintf(w, "%s: %d dead letters pending for group %s (%d in the topic)\n", c.Topic, c.Pending, c.Group, c.InTopic)
	}
	if c.Retired > 0 {
		fmt.Fprintf(w, "retired with cdc-relay dlq retire: %d (in %s)\n", c.Retired, c.RetiredTopic)
	}
	if c.Pending == 0 {
		return
	}
	section := func(title string, m map[string]int, order []string) {
		fmt.Fprintf(w, "by %s:\n", title)
		if order == nil {
			for k := range m {
				order = append(order, k)
			}
			slices.SortFunc(order, func(a, b string) int {
				if m[a] != m[b] {
					return m[b] - m[a]
				}
				return strings.Compare(a, b)
			})
		}
		for _, k := range order {
			if n, ok := m[k]; ok {
				fmt.Fprintf(w, "  %-24s %d\n", k, n)
			}
		}
	}
	section("error_kind", c.Kinds, nil)
	section("event_type", c.EventTypes, nil)
	var ages []string
	for _, b := range ageBuckets {
		ages = append(ages, b.label)
	}
	fmt.Fprintln(w, "by age (commit time; each bucket up to its bound):")
	for _, a := range ages {
		fmt.Fprintf(w, "  %-24s %d\n", a, c.Ages[a])
	}
	fmt.Fprintf(w, "re-appended by a redrive (%s > 0): %d\n", recordpkg.HeaderRedriveAttempts, c.Reappended)
	fmt.Fprintf(w, "oldest %s, newest %s\n", c.Oldest.Format(time.RFC3339), c.Newest.Format(time.RFC3339))
}
