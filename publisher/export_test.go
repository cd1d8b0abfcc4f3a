package publisher

import "github.com/twmb/franz-go/pkg/kgo"

// KgoRecord is r as the session hands it to kgo (kgoRecord), for the
// golden captures of package publisher_test.
func KgoRecord(r *Record) *kgo.Record { return r.kgoRecord() }

// PartitionOf is the relay's partitioner (partition), for the golden
// captures.
func PartitionOf(r *kgo.Record, n int) int { return partition(r, n) }
