package relay

import (
	"sort"
	"strings"
	"testing"
)

// helps is every cdc_relay_ family's help text in m, one
// "name<TAB>help" line each, sorted.
func helps(t *testing.T, m *Metrics) string {
	t.Helper()
	m.dlq.WithLabelValues("x")
	m.published.WithLabelValues("x")
	m.errors.WithLabelValues("x")
	m.skipped.WithLabelValues("x")
	m.unconfigured.WithLabelValues("x")
	m.unknown.total.WithLabelValues("x")
	m.registryRequests.WithLabelValues("x")
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "cdc_relay_") {
			lines = append(lines, f.GetName()+"\t"+f.GetHelp())
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}
