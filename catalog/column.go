package catalog

// Column is what the catalog says of a table column: its type oid as
// pgoutput sends it (atttypid; a domain's own oid), the oid of the base
// type it is stored as (the same unless a domain), the type's name for
// messages, and whether it is NOT NULL.
type Column struct {
	TypeOID uint32
	BaseOID uint32
	Type    string
	NotNull bool
}
