package inbox

// Event is one record as the handler sees it.
type Event[T any] struct {
	// ID is the record's `id` header: the outbox event id, the dedupe key.
	ID string
	// Type is the `event_type` header.
	Type string
	// AggregateType is the `aggregate_type` header.
	AggregateType string
	// AggregateID is the aggregate id: the record key decoded as
	// Config.KeyFormat says (the relay's --key-format).
	AggregateID string
	// Key is the record key's raw bytes.
	Key []byte
	// Headers holds every header of the record (the last value of a
	// repeated name), including the three above and e.g. traceparent.
	Headers map[string]string
	// Value is the decoded value: the Avro body decoded with its writer
	// schema into T (a struct with `avro` tags, or map[string]any).
	Value T
	// Null is true for a record without a value (a tombstone); Value is
	// then T's zero value.
	Null bool
	// SchemaID is the registry id of the writer schema.
	SchemaID int
	// Topic, Partition and Offset locate the record.
	Topic     string
	Partition int
	Offset    int64
	// Attempt counts the tries of this event in this process, from 1;
	// transient failures do not count. From RabbitMQ, each earlier
	// delivery (x-delivery-count) counts as a try.
	Attempt int

	rejected string // Redrive: why prepare refused it
}
