package publisher

// murmur2 is the hash the Java producer's default partitioner uses for keyed
// records, so cdc-relay places an aggregate on the partition Debezium would.
// TestMurmur2MatchesJava checks it, and Partition, against vectors taken
// from the Java client itself.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	n := length / 4
	for i := 0; i < n; i++ {
		j := i * 4
		k := uint32(data[j]) | uint32(data[j+1])<<8 | uint32(data[j+2])<<16 | uint32(data[j+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n*4:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// Partition returns the partition for key among n, as Java's
// Utils.toPositive(Utils.murmur2(key)) % n.
func Partition(key []byte, n int) int {
	if n <= 1 {
		return 0
	}
	return int(murmur2(key)&0x7fffffff) % n
}
