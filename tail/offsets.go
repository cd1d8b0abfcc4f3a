package tail

import (
	"strconv"
	"strings"

	"github.com/cdc-relay/cdc-relay/relay"
)

// ParseOffsets reads tail's --offset P:O[,P:O...] (Kafka): a
// *relay.ConfigError names what is wrong.
func ParseOffsets(s string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		ps, offs, ok := strings.Cut(item, ":")
		p, perr := strconv.ParseInt(ps, 10, 32)
		off, oerr := strconv.ParseInt(offs, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || off < 0 {
			return nil, relay.ConfigErr("offset", "%q is not PARTITION:OFFSET, e.g. 0:42 (several: 0:42,2:7)", item)
		}
		if _, dup := out[int32(p)]; dup {
			return nil, relay.ConfigErr("offset", "partition %d is given twice", p)
		}
		out[int32(p)] = off
	}
	return out, nil
}
