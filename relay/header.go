package relay

// Header is a record header's key and value, as every publisher header
// type spells it.
type Header = struct {
	Key   string
	Value []byte
}

// AppendHeader appends one header to hs, whatever the publisher's header
// type, as long as it is a key and a value.
func AppendHeader[H ~Header](hs []H, key string, value []byte) []H {
	return append(hs, H{Key: key, Value: value})
}
