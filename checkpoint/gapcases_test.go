package checkpoint

import (
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// gapCases are a GapError of each kind, as the guard makes them, by name:
// the golden texts are testdata/texts/gap-<name>-<broker>.txt.
func gapCases() map[string]*GapError {
	commit := time.Date(2026, 12, 1, 10, 30, 0, 123000000, time.UTC)
	written := time.Date(2026, 12, 1, 10, 31, 0, 0, time.UTC)
	own := &Record{Kind: KindCheckpoint, RelayID: "7301/orders/s1", LSN: "0/1954760", Timeline: 1, LastCommitTime: &commit, SystemID: "7301", WrittenAt: written}
	idle := &Record{Kind: KindCheckpoint, RelayID: "7301/orders/s1", LSN: "0/1954760", Timeline: 1, SystemID: "7301", WrittenAt: written}
	other := &Record{Kind: KindCheckpoint, RelayID: "7100/orders/s1", LSN: "0/3000028", Timeline: 1, LastCommitTime: &commit, SystemID: "7100", WrittenAt: written}
	return map[string]*GapError{
		"dropped":       {Slot: "s1", What: "does not exist", Checkpoint: own, SystemID: "7301", Timeline: 1},
		"invalidated":   {Slot: "s1", What: "was invalidated (wal_status lost)", Checkpoint: idle, SystemID: "7301", Timeline: 1},
		"ahead":         {Slot: "s1", Checkpoint: own, Ahead: replication.LSN(0x2000000), SystemID: "7301", Timeline: 1},
		"fork":          {Slot: "s1", Checkpoint: own, Fork: &replication.TimelineSwitch{TLI: 1, Switch: replication.LSN(0x1900000)}, SystemID: "7301", Timeline: 2},
		"upgraded":      {Slot: "s1", What: "does not exist", Other: other, SystemID: "7301", Timeline: 1},
		"no-checkpoint": {Slot: "s1", What: "does not exist", SystemID: "7301", Timeline: 1},
	}
}
