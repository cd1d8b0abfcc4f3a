// Package replication owns the PostgreSQL side of the relay: the publication
// and the pgoutput slot, the replication connection, keepalives, read
// deadlines, reconnects, and the acknowledgement rule.
//
// In: a libpq URL and the slot, publication and table names. Out: decoded
// outbox rows, in commit order, handed to a Session together with a sequence
// number. It is the only code that sends StandbyStatusUpdate, and it confirms
// only commit end LSNs that form a contiguous acknowledged prefix (see Tracker).
package replication
