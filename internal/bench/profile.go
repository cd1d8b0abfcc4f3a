package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// pprofHook is added to the relay's package main at build time with
// `go build -overlay`, so that a profile can be taken without changing the
// relay's source. When CDC_RELAY_BENCH_CPUPROFILE names a file, it profiles
// the CPU from process start; on SIGUSR1 it writes that profile and an
// allocation profile (FILE.allocs), each under a temporary name renamed
// into place once complete.
const pprofHook = `package main

// Added by internal/bench with go build -overlay; not part of cdc-relay.

import (
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func init() {
	path := os.Getenv("` + profileEnv + `")
	if path == "" {
		return
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		<-ch
		pprof.StopCPUProfile()
		f.Close()
		if a, err := os.Create(path + ".allocs.tmp"); err == nil {
			pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
			os.Rename(path+".allocs.tmp", path+".allocs")
		}
		os.Rename(path+".tmp", path)
	}()
}
`

// buildRelay builds cmd/cdc-relay from this checkout into dir, with
// pprofHook added when hook is set and the Replace entries of the
// `go build -overlay` file extraOverlay ("" none) applied, and returns the
// binary's path. It needs the go tool and the module's source.
func buildRelay(ctx context.Context, dir string, hook bool, extraOverlay string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("building the relay needs the module's source: run from the repository (go env GOMOD: %q, %v)", gomod, err)
	}
	root := filepath.Dir(gomod)
	overlay := map[string]map[string]string{"Replace": {}}
	if extraOverlay != "" {
		b, err := os.ReadFile(extraOverlay)
		if err == nil {
			err = json.Unmarshal(b, &overlay)
		}
		if err != nil || overlay["Replace"] == nil {
			return "", fmt.Errorf("--relay-overlay: want a go build -overlay file with Replace entries: %v", err)
		}
	}
	if hook {
		path := filepath.Join(dir, "bench_pprof_hook.go")
		if err := os.WriteFile(path, []byte(pprofHook), 0o644); err != nil {
			return "", err
		}
		overlay["Replace"][filepath.Join(root, "cmd", "cdc-relay", "zz_bench_pprof_hook.go")] = path
	}
	b, err := json.Marshal(overlay)
	if err != nil {
		return "", err
	}
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, b, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cdc-relay-variant")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-overlay", overlayPath,
		"-ldflags", "-X main.version=bench-build", "-o", bin, "./cmd/cdc-relay")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the relay: %v\n%s", err, out)
	}
	return bin, nil
}

// collectProfile asks the profiling relay to write its profiles and polls
// until both files are in place.
func collectProfile(ctx context.Context, c *child, path string) error {
	c.signal(syscall.SIGUSR1)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		_, err1 := os.Stat(path)
		_, err2 := os.Stat(path + ".allocs")
		if err1 == nil && err2 == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return c.failure("no profile in %s: %v (was the relay built by --cpuprofile?)", path, errors.Join(err1, err2, ctx.Err()))
		case <-c.done:
			return c.failure("exited before writing its profile to %s", path)
		case <-t.C:
		}
	}
}
