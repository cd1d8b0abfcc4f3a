package decoder

// Columns names the outbox table's columns. The zero value of a field never
// matches a column: leave Headers or CreatedAt empty when the table has no
// such column. Defaults come from DefaultColumns.
type Columns struct {
	ID            string // required; default "id" (bigserial primary key)
	AggregateType string // required; default "aggregate_type"
	AggregateID   string // required; default "aggregate_id" (the Kafka key)
	EventType     string // required; default "event_type"
	Payload       string // required; default "payload" (jsonb)
	Headers       string // optional; default "headers" (jsonb)
	CreatedAt     string // optional; default "created_at" (timestamptz)
}

// DefaultColumns returns the column names of the documented outbox DDL:
// "id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers",
// "created_at".
func DefaultColumns() Columns {
	return Columns{
		ID:            "id",
		AggregateType: "aggregate_type",
		AggregateID:   "aggregate_id",
		EventType:     "event_type",
		Payload:       "payload",
		Headers:       "headers",
		CreatedAt:     "created_at",
	}
}

// field numbers a Row field; a column maps to a bit set of fields, so one
// column may feed several fields (e.g. AggregateID configured as "id").
type field uint8

const (
	fieldID field = iota
	fieldAggregateType
	fieldAggregateID
	fieldEventType
	fieldPayload
	fieldHeaders
	fieldCreatedAt
	numFields
)

// requiredFields is the bit set of fields an outbox Insert cannot do without.
const requiredFields = 1<<fieldID | 1<<fieldAggregateType | 1<<fieldAggregateID | 1<<fieldEventType | 1<<fieldPayload

// names returns the configured column name of each field.
func (c Columns) names() [numFields]string {
	return [numFields]string{c.ID, c.AggregateType, c.AggregateID, c.EventType, c.Payload, c.Headers, c.CreatedAt}
}
