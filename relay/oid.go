package relay

// The PostgreSQL type oids the relay and its tools choose outbox columns
// by: integer and uuid ids, timestamp created_at columns.
const (
	OIDInt8        = 20
	OIDInt2        = 21
	OIDInt4        = 23
	OIDUUID        = 2950
	OIDTimestamp   = 1114
	OIDTimestamptz = 1184
)
