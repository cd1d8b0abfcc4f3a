package replication

import "testing"

func TestExhaustionSeconds(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	tests := []struct {
		name   string
		s      *SlotSample
		want   float64
		wantOK bool
	}{
		{"no sample", nil, 0, false},
		{"unlimited", &SlotSample{LagGrowth: 100}, 0, false},
		{"lag shrinking", &SlotSample{SafeWALSize: i(1000), LagGrowth: -5}, 0, false},
		{"lag steady", &SlotSample{SafeWALSize: i(1000), LagGrowth: 0}, 0, false},
		{"growing", &SlotSample{SafeWALSize: i(1000), LagGrowth: 100}, 10, true},
		{"already past", &SlotSample{SafeWALSize: i(-50), LagGrowth: 100}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.s.ExhaustionSeconds()
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("ExhaustionSeconds() = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
