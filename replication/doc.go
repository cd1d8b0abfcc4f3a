// Package replication owns the PostgreSQL side of the relay: the publication
// and the pgoutput slot, the replication connection, keepalives, read
// deadlines, reconnects, and the acknowledgement rule.
//
// In: a libpq URL and the slot, publication and table names. Out: decoded
// outbox rows, in commit order, handed to a Session together with a sequence
// number. It is the only code that sends StandbyStatusUpdate, and it confirms
// only commit end LSNs that form a contiguous acknowledged prefix (see Tracker).
//
// Takeover: a second instance on the slot gets SQLSTATE 55006 and retries at
// least every 2 s. PostgreSQL releases the slot when the holder's walsender
// ends: at once when the holder's process dies (its socket is closed), but
// only after wal_sender_timeout when the holder's host or network goes
// silent. Takeover therefore takes at most wal_sender_timeout + 2 s; lower it
// on the server or per connection (options=-c wal_sender_timeout=10s in the
// URL). The silent holder itself notices within its read timeout (see
// Config.ReadTimeout) and every later step is bounded (see dial.go).
package replication
