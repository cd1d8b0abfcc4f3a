package publisher

import "testing"

// javaPartitionCounts are the partition counts of javaVectors' columns.
var javaPartitionCounts = [8]int{2, 3, 6, 7, 12, 16, 31, 64}

// javaVectors are what the Java client says of each key: its
// Utils.murmur2, and Utils.toPositive(Utils.murmur2(key)) % n for each of
// javaPartitionCounts, which is where its default partitioner puts a keyed
// record. The keys are Apache Kafka's own UtilsTest.testMurmur2 inputs,
// every tail length, and the shapes outbox keys take: numbers, prefixed
// ids, UUIDs, JSON and Avro keys, non-ASCII and NUL bytes.
//
// Produced once with kafka-clients 4.4.0 by testdata/murmur2/Gen.java:
//
//	L=~/.cache/cdc-relay/kafka-4.4.0/libs
//	java -cp "$L/kafka-clients-4.4.0.jar:$L/slf4j-api-1.7.36.jar" publisher/testdata/murmur2/Gen.java
var javaVectors = []struct {
	key        string
	murmur2    int32
	partitions [8]int
}{
	{"", 275646681, [8]int{1, 0, 3, 2, 9, 9, 13, 25}},
	{"a", -1563381124, [8]int{0, 1, 4, 5, 4, 12, 28, 60}},
	{"ab", 316155434, [8]int{0, 2, 2, 0, 2, 10, 12, 42}},
	{"abc", 479470107, [8]int{1, 0, 3, 4, 3, 11, 20, 27}},
	{"abcd", -1323649548, [8]int{0, 2, 2, 5, 8, 4, 17, 52}},
	{"abcde", 461995741, [8]int{1, 1, 1, 4, 1, 13, 13, 29}},
	{"abcdef", 1870650108, [8]int{0, 0, 0, 5, 0, 12, 27, 60}},
	{"abcdefg", -346467175, [8]int{1, 1, 1, 4, 1, 9, 18, 25}},
	{"abcdefgh", -955427363, [8]int{1, 0, 3, 0, 9, 13, 17, 29}},
	{"21", -973932308, [8]int{0, 0, 0, 3, 0, 12, 26, 44}},
	{"foobar", -790332482, [8]int{0, 0, 0, 0, 6, 14, 27, 62}},
	{"a-little-bit-long-string", -985981536, [8]int{0, 2, 2, 1, 8, 0, 2, 32}},
	{"a-little-bit-longer-string", -1486304829, [8]int{1, 2, 5, 0, 11, 3, 0, 3}},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, [8]int{1, 2, 5, 3, 5, 13, 16, 13}},
	{"0", 971027396, [8]int{0, 2, 2, 3, 8, 4, 12, 4}},
	{"1", -1993445489, [8]int{1, 0, 3, 2, 3, 15, 27, 15}},
	{"7", -1961297549, [8]int{1, 0, 3, 1, 3, 3, 6, 51}},
	{"42", 417700972, [8]int{0, 1, 4, 3, 4, 12, 28, 44}},
	{"1000", 15042646, [8]int{0, 1, 4, 3, 10, 6, 20, 22}},
	{"99999", 1464793824, [8]int{0, 0, 0, 4, 0, 0, 21, 32}},
	{"123456789", -1822237082, [8]int{0, 0, 0, 1, 6, 6, 22, 38}},
	{"9223372036854775807", -1221667907, [8]int{1, 0, 3, 4, 9, 13, 28, 61}},
	{"order-42", 501153024, [8]int{0, 0, 0, 1, 0, 0, 18, 0}},
	{"ord_2k9", -1397022251, [8]int{1, 0, 3, 0, 9, 5, 5, 21}},
	{"ord_6w1b", -651762248, [8]int{0, 0, 0, 5, 0, 8, 13, 56}},
	{"customer/17", 1922869009, [8]int{1, 1, 1, 5, 1, 1, 17, 17}},
	{"Order:7f", 2143078573, [8]int{1, 1, 1, 6, 1, 13, 27, 45}},
	{"00000000-0000-4000-8000-000000000001", -694496258, [8]int{0, 0, 0, 1, 6, 14, 30, 62}},
	{"7c4f7d6e-2f55-4c4e-9f4e-0d9b8a3c1e21", -616841354, [8]int{0, 0, 0, 6, 6, 6, 27, 54}},
	{"0190d5f2-7c3a-7b1e-9a4f-174876e800", 1480949348, [8]int{0, 2, 2, 4, 8, 4, 19, 36}},
	{"5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11", 1575650103, [8]int{1, 0, 3, 6, 3, 7, 21, 55}},
	{"\"00000000-0000-4000-8000-000000000001\"", 2087590746, [8]int{0, 0, 0, 3, 6, 10, 30, 26}},
	{"{\"id\":42}", 486015037, [8]int{1, 1, 1, 4, 1, 13, 13, 61}},
	{"caf\xc3\xa9", -1358007374, [8]int{0, 0, 0, 6, 6, 2, 18, 50}},
	{"\xe6\x97\xa5\xe6\x9c\xac", -700811021, [8]int{1, 0, 3, 1, 3, 3, 29, 51}},
	{"\xc3\xbf\xc3\xbe\xc3\xbd", -827240790, [8]int{0, 2, 2, 4, 2, 10, 9, 42}},
	{"k\x00ey", -747223284, [8]int{0, 2, 2, 6, 8, 12, 5, 12}},
	{"\x00\x00\x00\x00\x07H00000000-0000-4000-8000-000000000001", -1551198243, [8]int{1, 2, 5, 2, 5, 13, 2, 29}},
}

// TestMurmur2MatchesJava: murmur2 and Partition agree with the Java client
// on every vector.
func TestMurmur2MatchesJava(t *testing.T) {
	for _, v := range javaVectors {
		if got := murmur2([]byte(v.key)); got != v.murmur2 {
			t.Errorf("murmur2(%q) = %d, Java's Utils.murmur2 says %d", v.key, got, v.murmur2)
		}
		for i, n := range javaPartitionCounts {
			if got := Partition([]byte(v.key), n); got != v.partitions[i] {
				t.Errorf("Partition(%q, %d) = %d, the Java client says %d", v.key, n, got, v.partitions[i])
			}
		}
		if got := Partition([]byte(v.key), 1); got != 0 {
			t.Errorf("Partition(%q, 1) = %d, want 0", v.key, got)
		}
	}
	// A nil key hashes as the empty key.
	if got, want := Partition(nil, 12), javaVectors[0].partitions[4]; javaVectors[0].key != "" || got != want {
		t.Errorf("Partition(nil, 12) = %d, want the empty key's %d", got, want)
	}
}

// BenchmarkPartition places the Java vectors' keys among 12 partitions.
func BenchmarkPartition(b *testing.B) {
	keys := make([][]byte, len(javaVectors))
	for i, v := range javaVectors {
		keys[i] = []byte(v.key)
	}
	b.ReportAllocs()
	sum := 0
	for i := 0; b.Loop(); i++ {
		sum += Partition(keys[i%len(keys)], 12)
	}
	_ = sum
}
