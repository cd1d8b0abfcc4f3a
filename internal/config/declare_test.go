package config

import (
	"testing"
	"time"
)

// TestEveryDeclaredSettingRegistered: each setting variable is in Relay,
// as the very value declared, so that its From reads what Load resolved.
func TestEveryDeclaredSettingRegistered(t *testing.T) {
	if len(declared) != len(Relay.Settings()) {
		t.Errorf("%d settings declared, %d in Relay", len(declared), len(Relay.Settings()))
	}
	for _, s := range declared {
		if got := Relay.Lookup(s.Name); got != s {
			t.Errorf("--%s is declared but not in Relay: add it to NewRegistry's list", s.Name)
		}
	}
}

// TestTypedFrom: each kind's From reads the resolved value, typed.
func TestTypedFrom(t *testing.T) {
	v, err := load(t, Run, append([]string{"--slot", "s1", "--kafka-tls", "--max-record-bytes", "2048",
		"--kafka-linger", "5ms", "--table", "a.b", "--table", "c.d", "--kafka-brokers", "k1:9092,k2:9092"}, required[:2]...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := Slot.From(v); got != "s1" {
		t.Errorf("Slot.From = %q, want s1", got)
	}
	if !KafkaTLS.From(v) || Tracing.From(v) {
		t.Errorf("KafkaTLS.From = %v, Tracing.From = %v, want true, false", KafkaTLS.From(v), Tracing.From(v))
	}
	if got := MaxRecordBytes.From(v); got != 2048 {
		t.Errorf("MaxRecordBytes.From = %d, want 2048", got)
	}
	if got := KafkaLinger.From(v); got != 5*time.Millisecond {
		t.Errorf("KafkaLinger.From = %s, want 5ms", got)
	}
	if got := Table.From(v); len(got) != 2 || got[0] != "a.b" || got[1] != "c.d" {
		t.Errorf("Table.From = %q, want [a.b c.d]", got)
	}
	if got := KafkaBrokers.Items(v); len(got) != 2 || got[1] != "k2:9092" {
		t.Errorf("KafkaBrokers.Items = %q, want [k1:9092 k2:9092]", got)
	}
	if Slot.SourceIn(v) != FromFlag || Publication.SourceIn(v) != FromDefault {
		t.Errorf("sources %v, %v, want FromFlag, FromDefault", Slot.SourceIn(v), Publication.SourceIn(v))
	}
	if got := Publication.Text(v); got != "cdc_relay" {
		t.Errorf("Publication.Text = %q, want the default cdc_relay", got)
	}
}

// TestTypedActions: an action flag declared with With is read through its
// variable: a bool one given or not, a valued one with its value.
func TestTypedActions(t *testing.T) {
	v, err := load(t, Tail, []string{"--kafka-brokers", "k:9092", "--follow", "false", "--since", "90m", "orders"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if FlagFollow.From(v) || !FlagFollow.Given(v) {
		t.Errorf("--follow false: From %v, Given %v, want false, true", FlagFollow.From(v), FlagFollow.Given(v))
	}
	if FlagPretty.From(v) || FlagPretty.Given(v) {
		t.Errorf("no --pretty: From %v, Given %v, want false, false", FlagPretty.From(v), FlagPretty.Given(v))
	}
	if got, given := FlagSince.From(v); got != "90m" || !given {
		t.Errorf("--since 90m: From = %q, %v", got, given)
	}
	if _, given := FlagCount.From(v); given {
		t.Error("no --count: given")
	}
	if a := FlagOffset.With("help"); a.Name != "offset" || a.Bool || a.Arg != "P:O[,P:O...]" || a.Help != "help" {
		t.Errorf("FlagOffset.With = %+v", a)
	}
	if a := FlagDryRun.With("h"); a.Name != "dry-run" || !a.Bool {
		t.Errorf("FlagDryRun.With = %+v", a)
	}
}
