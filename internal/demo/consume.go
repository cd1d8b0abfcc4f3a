package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// topicRegex matches the relay's default event topics and its DLQ.
const topicRegex = `^outbox\.(event\..+|dlq)$`

// consumer reads what the relay produced, as any Kafka consumer would:
// franz-go from the earliest offset, values decoded by hamba/avro with the
// writer schema that the schemaregistry package fetches from the registry
// by the id in the 5-byte header.
type consumer struct {
	client   *kgo.Client
	registry *schemaregistry.Registry
	schemas  map[int]*schemaregistry.WriterSchema // by id, as fetched

	tally
	byTopic  map[string]int // topic → records
	problems []string       // records that were not what the writer wrote
}

// newConsumer connects to the broker; topics created later are found by the
// frequent metadata refreshes.
func newConsumer(broker, registryURL string) (*consumer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(broker),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics(topicRegex),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	reg, err := schemaregistry.New(schemaregistry.Config{URL: registryURL})
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &consumer{
		client:   cl,
		registry: reg,
		schemas:  map[int]*schemaregistry.WriterSchema{},
		tally:    tally{seen: map[string]int{}},
		byTopic:  map[string]int{},
	}, nil
}

// await prints every record as it arrives until each written event has been
// seen, or ctx ends. It fails if a record cannot be decoded or is on the
// wrong topic.
func (c *consumer) await(ctx context.Context, want []written) error {
	byID := map[string]written{}
	for _, w := range want {
		byID[w.id] = w
	}
	for !c.allSeen(want) {
		fs := c.client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		fs.EachError(func(topic string, p int32, err error) {
			fmt.Printf("consumer    fetch %s p%d: %v (retrying)\n", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) { c.handle(ctx, r, byID) })
	}
	if len(c.problems) > 0 {
		return fmt.Errorf("%d unexpected record(s):\n  %s", len(c.problems), strings.Join(c.problems, "\n  "))
	}
	return nil
}

// handle prints one record and checks its topic, key and trace header
// against what was written.
func (c *consumer) handle(ctx context.Context, r *kgo.Record, byID map[string]written) {
	h := headers(r)
	id := h["id"]
	c.byTopic[r.Topic]++
	c.seen[id]++
	var body string
	if r.Topic == dlqTopic {
		body = fmt.Sprintf("error=%s  payload=%s", strconv.Quote(h["error"]), r.Value)
	} else {
		var err error
		if body, err = c.decode(ctx, r.Value); err != nil {
			body = "UNDECODABLE: " + err.Error()
			c.problems = append(c.problems, fmt.Sprintf("%s off%d id=%s: %v", r.Topic, r.Offset, id, err))
		}
	}
	dup := ""
	if c.seen[id] > 1 {
		dup = "  (duplicate)"
	}
	fmt.Printf("%-19s p%d off%-3d key=%s  id=%s %s  %s%s\n", r.Topic, r.Partition, r.Offset, r.Key, id, h["event_type"], body, dup)

	w, ok := byID[id]
	wantTopic := eventTopic
	if !w.valid {
		wantTopic = dlqTopic
	}
	switch {
	case !ok:
		c.problems = append(c.problems, fmt.Sprintf("%s off%d: id %q was not written by this demo", r.Topic, r.Offset, id))
	case r.Topic != wantTopic:
		c.problems = append(c.problems, fmt.Sprintf("id %s arrived on %s, want %s", id, r.Topic, wantTopic))
	case string(r.Key) != w.aggregateID:
		c.problems = append(c.problems, fmt.Sprintf("id %s has key %q, want the aggregate id %q", id, r.Key, w.aggregateID))
	case r.Topic == eventTopic && !strings.HasPrefix(h["traceparent"], "00-"):
		c.problems = append(c.problems, fmt.Sprintf("id %s lacks the traceparent header the writer set", id))
	}
}

// decode turns a Confluent-framed Avro value into JSON text (see render).
func (c *consumer) decode(ctx context.Context, value []byte) (string, error) {
	if len(value) < 5 || value[0] != 0 {
		return "", fmt.Errorf("not in the Confluent wire format: % x", value[:min(len(value), 8)])
	}
	id := int(binary.BigEndian.Uint32(value[1:5]))
	schema, err := c.schema(ctx, id)
	if err != nil {
		return "", err
	}
	rd := avro.NewReader(nil, 0).Reset(value[5:])
	var native any
	rd.ReadVal(schema.Avro, &native)
	if rd.Error != nil {
		return "", fmt.Errorf("schema %d: %w", id, rd.Error)
	}
	if rd.Peek(); rd.Error == nil { // Peek sets io.EOF at the end
		return "", fmt.Errorf("schema %d: bytes left after the record", id)
	}
	text, err := render(schema.Text, native)
	if err != nil {
		return "", fmt.Errorf("schema %d: %w", id, err)
	}
	return text, nil
}

// schema returns the Avro writer schema with id, fetched once.
func (c *consumer) schema(ctx context.Context, id int) (*schemaregistry.WriterSchema, error) {
	if s, ok := c.schemas[id]; ok {
		return s, nil
	}
	s, err := c.registry.SchemaByID(ctx, id)
	if err != nil {
		return nil, err // it names the id
	}
	if s.Avro == nil {
		return nil, fmt.Errorf("schema %d is %s, not Avro", id, s.Type)
	}
	c.schemas[id] = s
	return s, nil
}

// tally counts the messages each event id arrived in, for either broker's
// consumer.
type tally struct {
	seen map[string]int // event id → messages carrying it
}

// allSeen reports whether every written event has arrived.
func (t *tally) allSeen(want []written) bool {
	for _, w := range want {
		if t.seen[w.id] == 0 {
			return false
		}
	}
	return true
}

// missing lists the written events that have not arrived.
func (t *tally) missing(want []written) string {
	var ids []string
	for _, w := range want {
		if t.seen[w.id] == 0 {
			ids = append(ids, fmt.Sprintf("%s (%s)", w.id, w.eventType))
		}
	}
	return fmt.Sprintf("%d of %d missing: %s", len(ids), len(want), strings.Join(ids, ", "))
}

// duplicates counts messages beyond the first for each id.
func (t *tally) duplicates() int {
	n := 0
	for _, k := range t.seen {
		n += k - 1
	}
	return n
}

// counts describes how many records each topic held, e.g. "12 on
// outbox.event.Order, 1 on outbox.dlq".
func (c *consumer) counts() string {
	topics := make([]string, 0, len(c.byTopic))
	for t := range c.byTopic {
		topics = append(topics, t)
	}
	sort.Slice(topics, func(i, j int) bool { // alphabetical, the DLQ last
		if di, dj := topics[i] == dlqTopic, topics[j] == dlqTopic; di != dj {
			return dj
		}
		return topics[i] < topics[j]
	})
	parts := make([]string, len(topics))
	for i, t := range topics {
		parts[i] = fmt.Sprintf("%d on %s", c.byTopic[t], t)
	}
	return strings.Join(parts, ", ")
}

// close closes the Kafka client.
func (c *consumer) close() { c.client.Close() }

// headers returns the record's headers by key.
func headers(r *kgo.Record) map[string]string {
	h := make(map[string]string, len(r.Headers))
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	return h
}
