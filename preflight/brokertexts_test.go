package preflight

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/relay"
)

// TestCheckTextsNameTheBroker: check's warnings about
// synchronized_standby_slots and about integer ids in several tables say
// under Kafka what they always said, and under RabbitMQ name RabbitMQ and
// the exchange, never Kafka or a topic.
func TestCheckTextsNameTheBroker(t *testing.T) {
	kafka := &relay.Config{KafkaBrokers: []string{"k:9092"}, TopicTemplate: "outbox.event.{aggregate_type}"}
	rabbit := &relay.Config{RabbitMQURL: "amqp://r", RabbitMQExchange: "outbox", RoutingKey: "{event_type}", TopicTemplate: "outbox"}
	tables := []string{"public.a (id bigint)", "public.b (id bigint)"}

	const standbyKafka = "synchronized_standby_slots is not set: the relay may receive (and publish) transactions a standby lacks, which a failover then loses from the database but not from Kafka; " +
		"set it to the standbys' physical slots (ALTER SYSTEM SET synchronized_standby_slots = '...'; SELECT pg_reload_conf())"
	if got := noStandbySlots(kafka); got != standbyKafka {
		t.Errorf("Kafka:\n got %s\nwant %s", got, standbyKafka)
	}
	if got, want := noStandbySlots(rabbit), strings.Replace(standbyKafka, "from Kafka;", "from RabbitMQ;", 1); got != want {
		t.Errorf("RabbitMQ:\n got %s\nwant %s", got, want)
	}

	var out bytes.Buffer
	(&checker{out: &out}).integerIDs(kafka, tables)
	const idsKafka = "WARN  tables public.a (id bigint), public.b (id bigint) have integer ids, and their events can route to one topic (--topic-template outbox.event.{aggregate_type} takes the topic from aggregate_type and event_type, not from the table): " +
		"each table counts its ids from 1, so two events can share an id there, and a consumer that deduplicates on id drops the second as a duplicate; " +
		"give the tables uuid ids (docs/outbox.sql: outbox.Write gives each a UUIDv7), or ids from one shared sequence\n"
	if out.String() != idsKafka {
		t.Errorf("Kafka:\n got %s\nwant %s", out.String(), idsKafka)
	}
	out.Reset()
	(&checker{out: &out}).integerIDs(rabbit, tables)
	got := out.String()
	for _, want := range []string{"WARN  tables public.a (id bigint), public.b (id bigint) have integer ids", "exchange outbox", "--routing-key {event_type}", "share a message_id"} {
		if !strings.Contains(got, want) {
			t.Errorf("RabbitMQ: %q lacks %q", got, want)
		}
	}
	for _, never := range []string{"Kafka", "topic"} {
		if strings.Contains(got, never) {
			t.Errorf("RabbitMQ: %q names %s", got, never)
		}
	}
}
