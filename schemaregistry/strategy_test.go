package schemaregistry

import "testing"

func TestParseStrategy(t *testing.T) {
	tests := []struct {
		in      string
		want    Strategy
		wantErr bool
	}{
		{in: "topic_record", want: TopicRecord},
		{in: "TOPIC_RECORD", want: TopicRecord},
		{in: "TopicRecordNameStrategy", want: TopicRecord},
		{in: "topic", want: Topic},
		{in: " topic ", want: Topic},
		{in: "TopicNameStrategy", want: Topic},
		{in: "record", want: Record},
		{in: "RecordNameStrategy", want: Record},
		{in: "", wantErr: true},
		{in: "topic-record", wantErr: true},
		{in: "subject", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseStrategy(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseStrategy(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseStrategy(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			// String gives back a name ParseStrategy accepts.
			if back, err := ParseStrategy(got.String()); err != nil || back != got {
				t.Fatalf("ParseStrategy(%q) = %v, %v", got.String(), back, err)
			}
		})
	}
}

func TestStrategyString(t *testing.T) {
	for s, want := range map[Strategy]string{TopicRecord: "topic_record", Topic: "topic", Record: "record", 9: "Strategy(9)"} {
		if got := s.String(); got != want {
			t.Errorf("Strategy(%d).String() = %q, want %q", s, got, want)
		}
	}
	var zero Strategy
	if zero != TopicRecord {
		t.Errorf("zero Strategy = %v, want the default topic_record", zero)
	}
}

func TestSubject(t *testing.T) {
	const rec = "com.example.orders.OrderCreated"
	tests := []struct {
		s     Strategy
		topic string
		want  string
	}{
		{TopicRecord, "outbox.event.order", "outbox.event.order-com.example.orders.OrderCreated"},
		{TopicRecord, "orders-v2", "orders-v2-com.example.orders.OrderCreated"},
		{Topic, "outbox.event.order", "outbox.event.order-value"},
		{Record, "outbox.event.order", rec},
		{Record, "other", rec},
	}
	for _, tt := range tests {
		t.Run(tt.s.String()+"/"+tt.topic, func(t *testing.T) {
			got := tt.s.Subject(tt.topic, rec)
			if got != tt.want {
				t.Fatalf("Subject(%q) = %q, want %q", tt.topic, got, tt.want)
			}
			topic, ok := tt.s.topicOf(got, rec)
			if tt.s == Record {
				if ok {
					t.Fatalf("topicOf(%q) under record = %q, want none", got, topic)
				}
				return
			}
			if !ok || topic != tt.topic {
				t.Fatalf("topicOf(%q) = %q, %v; want %q", got, topic, ok, tt.topic)
			}
		})
	}
	for _, subject := range []string{"-value", "orders-com.example.orders.Other", rec} {
		if topic, ok := TopicRecord.topicOf(subject, rec); ok {
			t.Errorf("topic_record topicOf(%q) = %q, want no match", subject, topic)
		}
	}
	if topic, ok := Topic.topicOf("-value", rec); ok {
		t.Errorf(`topic topicOf("-value") = %q, want no match`, topic)
	}
}
