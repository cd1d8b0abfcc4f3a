package publisher

import (
	"strconv"
	"testing"

	"github.com/segmentio/kafka-go"
)

// javaVectors are Apache Kafka's UtilsTest.testMurmur2 inputs.
var javaVectors = []string{"21", "foobar", "a-little-bit-long-string", "a-little-bit-longer-string",
	"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", "abc"}

// partitionKeys are aggregate ids of the shapes outbox rows carry: short
// numbers, prefixed ids, UUIDs, and the empty key.
func partitionKeys() [][]byte {
	keys := [][]byte{nil, {}}
	for _, v := range javaVectors {
		keys = append(keys, []byte(v))
	}
	for i := range 10000 {
		keys = append(keys, []byte(strconv.Itoa(i)), []byte("ord_"+strconv.FormatInt(int64(i)*7919, 36)),
			[]byte("0190d5f2-7c3a-7b1e-9a4f-"+strconv.FormatInt(1e11+int64(i)*104729, 16)))
	}
	return keys
}

// partitionIDs is what kafka.Balancer.Balance wants: the ids 0..n-1.
func partitionIDs(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return ids
}

// TestPartitionAgreesWithKafkaGo: kafka-go's Murmur2Balancer, in its
// Consistent mode (the Java client's and librdkafka's "murmur2"; the default
// mode sends nil keys to a random partition), places every key where
// Partition does, for 1 to 64 partitions and the Java vectors.
func TestPartitionAgreesWithKafkaGo(t *testing.T) {
	bal := kafka.Murmur2Balancer{Consistent: true}
	keys := partitionKeys()
	for _, n := range []int{1, 2, 3, 6, 7, 12, 16, 31, 64} {
		ids := partitionIDs(n)
		for _, k := range keys {
			got := Partition(k, n)
			want := bal.Balance(kafka.Message{Key: k}, ids...)
			if got != want {
				t.Fatalf("Partition(%q, %d) = %d, kafka-go's Murmur2Balancer says %d", k, n, got, want)
			}
		}
	}
}

// BenchmarkPartition compares Partition with kafka-go's Murmur2Balancer on
// the same keys (12 partitions). The balancer takes a kafka.Message (a
// 152-byte struct) by value and the partition ids as a slice, which the
// caller must keep per partition count.
func BenchmarkPartition(b *testing.B) {
	keys := partitionKeys()
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		sum := 0
		for i := 0; b.Loop(); i++ {
			sum += Partition(keys[i%len(keys)], 12)
		}
		_ = sum
	})
	b.Run("kafka-go", func(b *testing.B) {
		b.ReportAllocs()
		bal := kafka.Murmur2Balancer{Consistent: true}
		ids := partitionIDs(12)
		sum := 0
		for i := 0; b.Loop(); i++ {
			sum += bal.Balance(kafka.Message{Key: keys[i%len(keys)]}, ids...)
		}
		_ = sum
	})
}
