package inbox

import "fmt"

// ConfigError is returned by New for a missing or invalid setting. Field
// names the Config field, e.g. "Consumer" or "MaxAttempts".
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("inbox: Config.%s: %s", e.Field, e.Reason)
}

// Reasons a record goes to the dead-letter topic without reaching the
// handler; the DLQ record's error header starts with one of them.
const (
	// ReasonBadMagic: the value is not in the Confluent wire format (no
	// 0x00 magic byte and 4-byte schema id).
	ReasonBadMagic = "bad_magic"
	// ReasonUnknownSchema: the registry has no schema under the value's id.
	ReasonUnknownSchema = "unknown_schema"
	// ReasonUndecodable: the Avro body does not decode with its writer
	// schema, or not into the consumer's Go type.
	ReasonUndecodable = "undecodable"
	// ReasonBadKey: the key does not decode as Config.KeyFormat says.
	ReasonBadKey = "bad_key"
	// ReasonNoID: the record has no `id` header to deduplicate on.
	ReasonNoID = "no_id"
	// ReasonHandler: the handler failed MaxAttempts times.
	ReasonHandler = "handler_failed"
)
