package schemaregistry

import (
	"fmt"
	"strconv"
	"strings"
)

// Strategy is the Confluent subject name strategy: how the subject under
// which a value schema is registered is derived from the topic and the
// record's full name.
type Strategy uint8

const (
	// TopicRecord names subjects "<topic>-<record full name>", like
	// Confluent's TopicRecordNameStrategy. Written "topic_record"; the
	// default. Several event types may share a topic.
	TopicRecord Strategy = iota
	// Topic names subjects "<topic>-value", like Confluent's
	// TopicNameStrategy (the Java serializer's default). Written "topic".
	// Every event type on a topic must then evolve as one schema.
	Topic
	// Record names subjects "<record full name>", like Confluent's
	// RecordNameStrategy. Written "record". Every topic shares one subject
	// per record.
	Record
)

// ParseStrategy parses a strategy name: "topic_record", "topic" or
// "record" (case-insensitive; the Confluent class names
// TopicRecordNameStrategy, TopicNameStrategy and RecordNameStrategy are
// accepted too).
func ParseStrategy(s string) (Strategy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "topic_record", "topicrecordnamestrategy":
		return TopicRecord, nil
	case "topic", "topicnamestrategy":
		return Topic, nil
	case "record", "recordnamestrategy":
		return Record, nil
	}
	return 0, fmt.Errorf("unknown subject name strategy %q (want topic_record, topic or record)", s)
}

// String returns the name ParseStrategy accepts.
func (s Strategy) String() string {
	switch s {
	case TopicRecord:
		return "topic_record"
	case Topic:
		return "topic"
	case Record:
		return "record"
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

// Subject returns the subject under which a value whose schema is the
// record recordFullName is registered when it goes to topic.
func (s Strategy) Subject(topic, recordFullName string) string {
	switch s {
	case Topic:
		return topic + "-value"
	case Record:
		return recordFullName
	default:
		return topic + "-" + recordFullName
	}
}

// topicOf returns the topic part of subject under s, or false when subject
// cannot have been made by s for a record named recordFullName.
func (s Strategy) topicOf(subject, recordFullName string) (string, bool) {
	var suffix string
	switch s {
	case Topic:
		suffix = "-value"
	case TopicRecord:
		suffix = "-" + recordFullName
	default:
		return "", false
	}
	topic, ok := strings.CutSuffix(subject, suffix)
	return topic, ok && topic != ""
}
