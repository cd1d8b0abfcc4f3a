package preflight

import (
	"strings"

	"github.com/cdc-relay/cdc-relay/catalog"
	"github.com/cdc-relay/cdc-relay/relay"
)

// integerID says whether an id column's type is an integer (smallint,
// integer, bigint and their domains: bigserial's bigint).
func integerID(col catalog.Column) bool {
	switch col.BaseOID {
	case relay.OIDInt2, relay.OIDInt4, relay.OIDInt8:
		return true
	}
	return false
}

// integerIDs warns when two or more configured tables have integer ids:
// each table counts its ids from 1, and the topic comes from a row's
// aggregate and event type, not from its table, so two tables can put
// events with the same id in one topic, where consumers that deduplicate on
// id (processed_messages) take the second for a duplicate and drop it;
// under RabbitMQ every event goes to one exchange, and so can meet the
// other table's in a queue.
// tables are "schema.table (column type)".
func (c *checker) integerIDs(cfg *relay.Config, tables []string) {
	if len(tables) < 2 {
		return
	}
	if cfg.RabbitMQ() {
		c.warn("tables %s have integer ids, and their events all go to exchange %s (--routing-key %s takes the routing key from the event, not from the table), so they can meet in one queue: "+
			"each table counts its ids from 1, so two messages there can share a message_id, and a consumer that deduplicates on message_id drops the second as a duplicate; "+
			"give the tables uuid ids (docs/outbox.sql: outbox.Write gives each a UUIDv7), or ids from one shared sequence",
			strings.Join(tables, ", "), cfg.RabbitMQExchange, cfg.RoutingKey)
		return
	}
	where := "one topic"
	if !strings.Contains(cfg.TopicTemplate, "{") {
		where = "the one topic " + cfg.TopicTemplate
	}
	c.warn("tables %s have integer ids, and their events can route to %s (--topic-template %s takes the topic from aggregate_type and event_type, not from the table): "+
		"each table counts its ids from 1, so two events can share an id there, and a consumer that deduplicates on id drops the second as a duplicate; "+
		"give the tables uuid ids (docs/outbox.sql: outbox.Write gives each a UUIDv7), or ids from one shared sequence",
		strings.Join(tables, ", "), where, cfg.TopicTemplate)
}
