package replication

import "fmt"

// LSN is a PostgreSQL WAL position.
type LSN uint64

// String formats the LSN as PostgreSQL does, e.g. 0/16B3748.
func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l)) }

// ParseLSN parses the X/X text form.
func ParseLSN(s string) (LSN, error) {
	var hi, lo uint32
	if _, err := fmt.Sscanf(s, "%X/%X", &hi, &lo); err != nil {
		return 0, fmt.Errorf("parse LSN %q: %w", s, err)
	}
	return LSN(uint64(hi)<<32 | uint64(lo)), nil
}
