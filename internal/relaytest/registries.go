package relaytest

import "testing"

// EachRegistry runs test as a parallel subtest per registry of regs, named
// after it ("axonops", "apicurio"), each failing unless its registry runs.
func EachRegistry(t *testing.T, regs []SchemaRegistry, test func(t *testing.T, reg SchemaRegistry)) {
	t.Helper()
	for _, reg := range regs {
		t.Run(reg.Name(), func(t *testing.T) {
			t.Parallel()
			Need(t, reg)
			test(t, reg)
		})
	}
}

// DefaultBackward gives subject the level BACKWARD where the registry's
// default is not: Apicurio Registry has no compatibility rule unless one is
// set (GET /config reports NONE, and it registers any change), where
// Confluent's and AxonOps' default is BACKWARD.
func DefaultBackward(t testing.TB, reg SchemaRegistry, subject string) {
	t.Helper()
	if reg.Name() == "apicurio" {
		reg.SetLevel(t, subject, "BACKWARD")
	}
}
