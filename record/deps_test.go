package record

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies pins the direction of the imports: the row → record step
// is pure, so neither pgx nor the replication connection may be among its
// dependencies, however indirectly.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "github.com/cdc-relay/cdc-relay/record" {
		t.Fatalf("go list -deps did not list the record package last: %q", deps)
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "github.com/jackc/") || dep == "github.com/cdc-relay/cdc-relay/replication" {
			t.Errorf("record depends on %s: the record step must import neither pgx nor replication/", dep)
		}
	}
}
