package replication

import "testing"

func TestParseTimelineHistory(t *testing.T) {
	got, err := ParseTimelineHistory([]byte("1\t0/3000158\tno recovery target specified\n\n2\t1/A0000000\tat restore point \"x\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []TimelineSwitch{{TLI: 1, Switch: 0x3000158}, {TLI: 2, Switch: 0x1A0000000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := ParseTimelineHistory([]byte("x\t0/1\tbad\n")); err == nil {
		t.Fatal("a bad timeline was accepted")
	}
}
