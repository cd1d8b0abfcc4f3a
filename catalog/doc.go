// Package catalog holds what the PostgreSQL catalog says of an outbox
// table's columns, as a plain value: replication reads it (DescribeTable)
// and the record step uses it to choose key, header and timestamp forms.
//
// It imports nothing, so that the pure steps (record) depend neither on
// pgx nor on the replication connection.
package catalog
