package kafkatest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

const (
	// startTimeout bounds how long Start and Restart wait for the broker to
	// answer. It usually takes 3-6 s on a 2-core machine, but a minute was
	// seen with the cores oversubscribed ten times; a broker that exits is
	// noticed at once, so the long bound only delays reporting a hang.
	startTimeout = 180 * time.Second
	// stopGrace bounds how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 30 * time.Second
	// brokerHeap caps the broker's heap: the machine's cores and memory are
	// shared with PostgreSQL, the relay and the tests.
	brokerHeap = "-Xmx512m"
)

// Options configure Start. The zero value gives a broker that creates
// single-partition topics on first use.
type Options struct {
	// MessageMaxBytes sets the broker's message.max.bytes; 0 keeps Kafka's
	// default (1048588).
	MessageMaxBytes int
	// AdvertisedHost replaces the host:port advertised for the PLAINTEXT
	// listener, e.g. to route clients through a fault-injecting TCP proxy;
	// "" advertises the real listener.
	AdvertisedHost string
	// Dir is the directory for config, data and server.log; it is created
	// if missing, its data/ subdirectory is formatted anew, and Close keeps
	// it. "" uses a new temporary directory that Close removes.
	Dir string
	// ExtraConfig adds or overrides server.properties entries, e.g.
	// "num.partitions" (default "1").
	ExtraConfig map[string]string
	// SASLUsers, when not empty, adds a SASL_PLAINTEXT listener (SASLAddr)
	// accepting these user names and passwords with each of Mechanisms:
	// PLAIN users come from the listener's JAAS config, SCRAM credentials
	// (SHA-256 and SHA-512) are written into the cluster metadata when the
	// storage is formatted. With TLS set, a SASL_SSL listener (SASLSSLAddr)
	// accepts them too. Names and passwords may not hold spaces, quotes,
	// backslashes, commas, '=' or brackets. nil (the default) adds none.
	SASLUsers map[string]string
	// TLS, when set, adds an SSL listener (SSLAddr) serving its certificate,
	// and a SASL_SSL listener when SASLUsers is set. nil (the default) adds
	// none. PLAINTEXT stays the inter-broker listener either way.
	TLS *TLS
	// JVMOptions are added after the broker's default JVM flags, so a later
	// -Xmx or -XX flag wins; nil keeps the defaults (a 512 MB heap and G1).
	JVMOptions []string
}

// Broker is a running single-node Kafka cluster owned by a test.
type Broker struct {
	opts    Options
	libs    string
	dir     string
	tempDir bool
	ports   listenerPorts

	mu     sync.Mutex // serialises Stop, Restart and Close
	proc   *process   // nil while stopped
	closed bool
}

// Start formats fresh KRaft storage, starts the broker on random loopback
// ports and returns once it answers a metadata request. Failures carry the
// tail of the server log. A port taken by someone else in the meantime is
// retried with new ports.
func Start(opts Options) (*Broker, error) {
	if err := checkSecurity(opts); err != nil {
		return nil, err
	}
	if err := testtier.Check(); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	libs, err := libsDir()
	if err != nil {
		return nil, err
	}
	b := &Broker{opts: opts, libs: libs, dir: opts.Dir}
	if b.dir == "" {
		if b.dir, err = os.MkdirTemp("", "kafkatest-"); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		b.tempDir = true
	} else if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	for attempt := 1; ; attempt++ {
		if err = b.format(); err == nil {
			err = b.start()
		}
		if err == nil {
			return b, nil
		}
		if attempt == 3 || !portClash(b.LogPath()) {
			break
		}
	}
	err = fmt.Errorf("kafkatest: start: %w\n--- tail of %s ---\n%s", err, b.LogPath(), tail(b.LogPath(), 40))
	if b.tempDir {
		os.RemoveAll(b.dir)
	}
	return nil, err
}

// format picks ports, writes the config and formats an empty data dir.
func (b *Broker) format() error {
	hasSASL, hasTLS := len(b.opts.SASLUsers) > 0, b.opts.TLS != nil
	ports, err := freeport.GetN(5) // fixed positions; unused ones are dropped
	if err != nil {
		return err
	}
	b.ports = listenerPorts{plain: ports[0], controller: ports[1]}
	if hasSASL {
		b.ports.sasl = ports[2]
	}
	if hasSASL && hasTLS {
		b.ports.saslSSL = ports[3]
	}
	if hasTLS {
		b.ports.ssl = ports[4]
		if err := writeTLSFiles(b.dir, b.opts.TLS); err != nil {
			return err
		}
	}
	data := filepath.Join(b.dir, "data")
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	if err := writeConfig(b.dir, properties(b.opts, b.dir, data, b.ports)); err != nil {
		return err
	}
	id, err := newClusterID()
	if err != nil {
		return err
	}
	log, err := b.openLog()
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "--- kafkatest %s: format storage, cluster id %s ---\n", stamp(), id)
	args := append([]string{"format", "--standalone", "-t", id, "-c", "server.properties"}, scramArgs(b.opts.SASLUsers)...)
	cmd := java(b.libs, b.dir, log, append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1"}, archiveFlags(b.libs)...),
		"kafka.tools.StorageTool", args...)
	p, err := launch(cmd)
	if err != nil {
		return fmt.Errorf("run storage tool: %w", err)
	}
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
		return fmt.Errorf("storage format did not finish within %s", startTimeout)
	}
	if p.err != nil {
		return fmt.Errorf("format storage: %w", p.err)
	}
	return nil
}

// start launches the broker and waits until it is ready; on failure the
// process is killed.
func (b *Broker) start() error {
	log, err := b.openLog()
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own copy of the descriptor
	fmt.Fprintf(log, "--- kafkatest %s: start broker on %s ---\n", stamp(), b.Addr())
	cmd := java(b.libs, b.dir, log,
		slices.Concat([]string{brokerHeap, "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError"}, testtier.QuickJIT(), archiveFlags(b.libs), b.opts.JVMOptions),
		"kafka.Kafka", "server.properties")
	p, err := launch(cmd)
	if err != nil {
		return fmt.Errorf("run broker: %w", err)
	}
	if err := waitReady(p, startTimeout, b.probe); err != nil {
		p.kill()
		return err
	}
	b.proc = p
	return nil
}

// stamp formats the current time like the broker's log lines.
func stamp() string { return time.Now().Format("2006-01-02 15:04:05,000") }

func (b *Broker) openLog() (*os.File, error) {
	return os.OpenFile(b.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// Addr returns the bootstrap address of the real PLAINTEXT listener,
// "127.0.0.1:port".
func (b *Broker) Addr() string { return hostPort(b.ports.plain) }

// SASLAddr returns the address of the SASL_PLAINTEXT listener, or "" when
// Options.SASLUsers is empty.
func (b *Broker) SASLAddr() string { return hostPort(b.ports.sasl) }

// SASLSSLAddr returns the address of the SASL_SSL listener, or "" unless
// both Options.SASLUsers and Options.TLS are set.
func (b *Broker) SASLSSLAddr() string { return hostPort(b.ports.saslSSL) }

// SSLAddr returns the address of the SSL listener (mutual TLS when
// Options.TLS.ClientAuth is set), or "" when Options.TLS is nil.
func (b *Broker) SSLAddr() string { return hostPort(b.ports.ssl) }

// hostPort is "127.0.0.1:port", or "" for port 0 (no such listener).
func hostPort(port int) string {
	if port == 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// probe checks that the broker serves requests: a metadata request on the
// PLAINTEXT listener, then a SASL handshake on each SASL listener that
// must list every mechanism. The listeners start together, so the
// SSL-only listener is not probed (it may demand a client certificate).
func (b *Broker) probe() error {
	if err := probe(b.Addr()); err != nil {
		return err
	}
	if addr := b.SASLAddr(); addr != "" {
		if err := probeSASL(addr, false); err != nil {
			return fmt.Errorf("SASL_PLAINTEXT listener: %w", err)
		}
	}
	if addr := b.SASLSSLAddr(); addr != "" {
		if err := probeSASL(addr, true); err != nil {
			return fmt.Errorf("SASL_SSL listener: %w", err)
		}
	}
	return nil
}

// LogPath returns the path of the broker's log file (stdout and stderr of
// every java process this Broker ran, appended in order).
func (b *Broker) LogPath() string { return filepath.Join(b.dir, "server.log") }

// Dir returns the directory holding the config, the data and the log.
func (b *Broker) Dir() string { return b.dir }

// Stop shuts the broker down gracefully (SIGTERM, then SIGKILL after 30 s)
// and keeps its data. Stopping a stopped broker does nothing.
func (b *Broker) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc != nil {
		b.proc.stop(stopGrace)
		b.proc = nil
	}
	return nil
}

// Restart stops the broker if it runs and starts it again on the same ports
// and data dir, returning once it answers.
func (b *Broker) Restart() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("kafkatest: restart: broker is closed")
	}
	if b.proc != nil {
		b.proc.stop(stopGrace)
		b.proc = nil
	}
	if err := b.start(); err != nil {
		return fmt.Errorf("kafkatest: restart: %w\n--- tail of %s ---\n%s", err, b.LogPath(), tail(b.LogPath(), 40))
	}
	return nil
}

// Close stops the broker and removes its directory if Start created it.
func (b *Broker) Close() error {
	if err := b.Stop(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.tempDir {
		if err := os.RemoveAll(b.dir); err != nil {
			return fmt.Errorf("kafkatest: close: %w", err)
		}
	}
	return nil
}
