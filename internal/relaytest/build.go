package relaytest

import (
	"fmt"
	"os/exec"
)

// Build runs `go build [flags] -o outDir/ pkgs...` in dir (the module root,
// or "" for the current directory), so each binary lands in outDir named
// after its package directory. The error carries the compiler's output.
func Build(dir, outDir string, flags []string, pkgs ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", outDir+"/")
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", pkgs, err, out)
	}
	return nil
}
