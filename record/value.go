package record

import (
	"bytes"
	"encoding/json"
	"errors"
)

var errNotObject = errors.New("payload is not a JSON object")

// jsonValue writes the payload as compact JSON object bytes. It is used by
// the reader goroutine only: scratch is reused from event to event.
type jsonValue struct {
	scratch bytes.Buffer
}

// append appends payload, compacted, to dst. A payload that is not valid
// JSON, or not an object, is an error.
func (v *jsonValue) append(dst, payload []byte) ([]byte, error) {
	i := 0
	for i < len(payload) && (payload[i] == ' ' || payload[i] == '\t' || payload[i] == '\n' || payload[i] == '\r') {
		i++
	}
	if i == len(payload) || payload[i] != '{' {
		return dst, errNotObject
	}
	v.scratch.Reset()
	if err := json.Compact(&v.scratch, payload); err != nil {
		return dst, errors.New("payload is not valid JSON: " + err.Error())
	}
	return append(dst, v.scratch.Bytes()...), nil
}
