package inbox

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// decodeKey returns the aggregate id the relay wrote as key in format (its
// --key-format). An error is a key that does not decode: the record goes to
// the dead-letter topic.
func decodeKey(format string, key []byte) (string, error) {
	switch format {
	case KeyJSON:
		return jsonKey(key)
	case KeyJSONSchema:
		var env struct {
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(key, &env); err != nil || env.Payload == nil {
			return "", fmt.Errorf("key is not a JSON {\"schema\":...,\"payload\":...} envelope (--key-format json-schema): %q", clip(key))
		}
		return jsonKey(env.Payload)
	case KeyAvro:
		if len(key) < 6 || key[0] != 0 {
			return "", fmt.Errorf("key is not a Confluent-framed Avro string (--key-format avro): % x", key[:min(len(key), 8)])
		}
		n, w := binary.Varint(key[5:])
		if w <= 0 || n < 0 || int64(len(key)-5-w) != n {
			return "", fmt.Errorf("key's Avro string length does not match its %d bytes", len(key)-5)
		}
		s := key[5+w:]
		if !utf8.Valid(s) {
			return "", fmt.Errorf("key's Avro string is not UTF-8")
		}
		return string(s), nil
	}
	return string(key), nil
}

// jsonKey decodes a JSON string literal, or a number (an integer column).
func jsonKey(b []byte) (string, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err == nil && !d.More() {
		switch v := v.(type) {
		case string:
			return v, nil
		case json.Number:
			return v.String(), nil
		}
	}
	return "", fmt.Errorf("key is not a JSON string or number (--key-format json): %q", clip(b))
}

func clip(b []byte) []byte { return b[:min(len(b), 64)] }
