package main

import (
	"os"
	"slices"
	"testing"
)

// TestBrokerFlag checks --broker rabbitmq's sizes and rates (200k and 1M
// rows, 1k/s, unless given), --queue-type, and that Kafka-only flags and
// unknown values are refused.
func TestBrokerFlag(t *testing.T) {
	rel := t.TempDir() + "/relay"
	if err := os.WriteFile(rel, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--relay", rel, "--broker", "rabbitmq"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{200000, 1000000}; !slices.Equal(o.rabbitRows, want) {
		t.Errorf("rows = %v, want %v", o.rabbitRows, want)
	}
	if want := []int{1000}; !slices.Equal(o.rates, want) {
		t.Errorf("rates = %v, want %v", o.rates, want)
	}
	if o.queueType != "quorum" {
		t.Errorf("queue type = %q, want quorum", o.queueType)
	}
	o, err = parseFlags([]string{"--relay", rel, "--broker", "rabbitmq", "--rows", "20000", "--rates", "500,2000", "--queue-type", "classic"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.rabbitRows, []int{20000}) || !slices.Equal(o.rates, []int{500, 2000}) || o.queueType != "classic" {
		t.Errorf("rows %v, rates %v, queue type %q; want [20000], [500 2000], classic", o.rabbitRows, o.rates, o.queueType)
	}
	o, err = parseFlags([]string{"--relay", rel})
	if err != nil || o.broker != "kafka" || o.rabbitRows != nil || len(o.rates) != 3 {
		t.Errorf("default: broker %q, rows %v, rates %v, %v; want kafka, none, the three Kafka rates", o.broker, o.rabbitRows, o.rates, err)
	}
	for _, args := range [][]string{
		{"--broker", "nats"},
		{"--broker", "rabbitmq", "--queue-type", "stream"},
		{"--broker", "rabbitmq", "--debezium"},
		{"--broker", "rabbitmq", "--delivery", "exactly-once"},
	} {
		if _, err := parseFlags(append([]string{"--relay", rel}, args...)); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
