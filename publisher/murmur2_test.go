package publisher

import "testing"

// Expected values from Apache Kafka's own UtilsTest.testMurmur2.
func TestMurmur2MatchesJava(t *testing.T) {
	tests := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range tests {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestPartitionStable(t *testing.T) {
	for n := 1; n < 10; n++ {
		p := Partition([]byte("order-42"), n)
		if p < 0 || p >= n {
			t.Fatalf("Partition(n=%d) = %d out of range", n, p)
		}
		if Partition([]byte("order-42"), n) != p {
			t.Fatal("Partition is not stable")
		}
	}
}
