package rabbittest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// bin holds Debian's rabbitmq-server scripts.
const bin = "/usr/lib/rabbitmq/bin"

// startTimeout bounds the wait for the node: about 11 s on an idle machine.
const startTimeout = 120 * time.Second

// Options are a node's extras.
type Options struct {
	Plugins []string // enabled besides rabbitmq_consistent_hash_exchange
	Config  []string // rabbitmq.conf lines besides loopback_users = none
	// TLS, when set, opens an amqps listener (AMQPSURL) with this server
	// certificate and key and the CA that verifies clients, all PEM files.
	TLS *TLSFiles
}

// TLSFiles are the PEM files of an amqps listener.
type TLSFiles struct{ CA, Cert, Key string }

// Node is a running private RabbitMQ node owned by a test.
type Node struct {
	opts             Options
	dir              string
	name             string
	amqp, dist, epmd int
	amqps            int
	cmd              *exec.Cmd
	done             chan struct{}
	epmdCmd          *exec.Cmd // the node's own epmd, a child of the test
}

// Start runs a node on free loopback ports and returns once it is up.
func Start(opts Options) (*Node, error) {
	if err := testtier.Check(); err != nil {
		return nil, fmt.Errorf("rabbittest: %w", err)
	}
	if _, err := os.Stat(filepath.Join(bin, "rabbitmq-server")); err != nil {
		return nil, fmt.Errorf("rabbittest: no RabbitMQ in %s: run bash scripts/setup.sh (make test does)", bin)
	}
	dir, err := os.MkdirTemp("", "rabbitmq-")
	if err != nil {
		return nil, fmt.Errorf("rabbittest: %w", err)
	}
	n := &Node{opts: opts, dir: dir}
	n.name = "rmq" + strconv.Itoa(os.Getpid()) + "x" + filepath.Base(dir)[len("rabbitmq-"):] + "@localhost"
	plugins := append([]string{"rabbitmq_consistent_hash_exchange"}, opts.Plugins...)
	conf := append([]string{"loopback_users = none"}, opts.Config...)
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("["+strings.Join(plugins, ",")+"].\n"), 0o644); err != nil {
		return nil, n.fail(err)
	}
	ports, err := lowPorts(4)
	if err != nil {
		return nil, n.fail(err)
	}
	n.amqp, n.dist, n.epmd = ports[0], ports[1], ports[2]
	if opts.TLS != nil {
		n.amqps = ports[3]
		conf = append(conf, "listeners.ssl.default = 127.0.0.1:"+strconv.Itoa(n.amqps),
			"ssl_options.cacertfile = "+opts.TLS.CA, "ssl_options.certfile = "+opts.TLS.Cert, "ssl_options.keyfile = "+opts.TLS.Key,
			"ssl_options.verify = verify_none", "ssl_options.fail_if_no_peer_cert = false")
	}
	if err := os.WriteFile(filepath.Join(dir, "rabbitmq.conf"), []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return nil, n.fail(err)
	}
	// The node's epmd runs as the test's child, not as the daemon
	// rabbitmq-server would start (which outlives the test), and dies with
	// the test binary.
	n.epmdCmd = exec.Command("epmd", "-port", strconv.Itoa(n.epmd), "-address", "127.0.0.1")
	n.epmdCmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.epmdCmd.Start(); err != nil {
		return nil, n.fail(fmt.Errorf("run epmd: %w", err))
	}
	if err := n.Start(); err != nil {
		err = fmt.Errorf("%w\n--- tail of %s ---\n%s", err, n.LogPath(), n.LogTail(40))
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) fail(err error) error {
	os.RemoveAll(n.dir)
	return fmt.Errorf("rabbittest: %w", err)
}

// lowPorts finds n distinct free ports below the ephemeral range
// (32768-60999 here), where no outgoing connection of a test can hold
// them: a node whose port was taken that way cannot start.
func lowPorts(n int) ([]int, error) {
	var ports []int
	seen := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("no free port in 20000-32000")
		}
		p := 20000 + rand.IntN(12000)
		if seen[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		seen[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// env is the node's environment, for the server and for rabbitmqctl.
func (n *Node) env() []string {
	return append(os.Environ(),
		"RABBITMQ_NODENAME="+n.name,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(n.amqp),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(n.dist),
		"ERL_EPMD_PORT="+strconv.Itoa(n.epmd),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(n.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(n.dir, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(n.dir, "rabbitmq"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(n.dir, "enabled_plugins"),
		"HOME="+n.dir,
	)
}

// Start starts the node again after Stop or Kill (the first start is the
// package's Start), on the same ports and data, and waits until it is up.
func (n *Node) Start() error {
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return errors.New("rabbittest: the node is running")
		}
	}
	out, err := os.OpenFile(filepath.Join(n.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("rabbittest: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(filepath.Join(bin, "rabbitmq-server"))
	cmd.Env = n.env()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rabbittest: run rabbitmq-server: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
	// The node is up when a client can log in and declare an exchange of
	// the consistent-hash plugin's type: the listener opens a moment
	// before the plugins have started. Polling rabbitmqctl await_startup
	// instead cost an Erlang VM per poll (it fails at once until the node
	// has registered with epmd).
	deadline := time.After(startTimeout)
	for {
		last := n.ready()
		if last == nil {
			break
		}
		select {
		case <-done:
			return fmt.Errorf("rabbittest: node %s exited while starting", n.name)
		case <-deadline:
			return fmt.Errorf("rabbittest: node %s did not start in %s: %w", n.name, startTimeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if len(n.opts.Plugins) > 0 { // plugins the probe does not see
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if _, err := n.ctl(ctx, "-q", "await_startup", "--timeout", strconv.Itoa(int(startTimeout/time.Second))); err != nil {
			return fmt.Errorf("rabbittest: node %s did not start: %w", n.name, err)
		}
	}
	return nil
}

// ready logs in as guest and declares, then deletes, an exchange of type
// x-consistent-hash.
func (n *Node) ready() error {
	conn, err := amqp.DialConfig(n.URL(), amqp.Config{Dial: amqp.DefaultDial(time.Second)})
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	const probe = "rabbittest.ready"
	if err := ch.ExchangeDeclare(probe, "x-consistent-hash", false, true, false, false, nil); err != nil {
		return err
	}
	return ch.ExchangeDelete(probe, false, false)
}

// Ctl runs rabbitmqctl against the node and returns its output. Each run
// starts an Erlang VM of its own, which took over 60 s on a machine with
// 25 runnable processes per CPU: the bound is only against a hang.
func (n *Node) Ctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return n.ctl(ctx, args...)
}

func (n *Node) ctl(ctx context.Context, args ...string) (string, error) {
	return n.tool(ctx, "rabbitmqctl", args...)
}

// tool runs one of the node's CLI tools (rabbitmqctl, rabbitmq-queues...).
func (n *Node) tool(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Env = n.env()
	b, err := cmd.CombinedOutput()
	if err != nil {
		return string(b), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// Stop stops the node cleanly and waits for it to exit: SIGTERM, which
// rabbitmq-server passes to the VM, stops it as rabbitmqctl stop does,
// without starting an Erlang VM for the command.
func (n *Node) Stop() error {
	if n.cmd == nil || n.cmd.Process == nil {
		return errors.New("rabbittest: the node is not running")
	}
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("rabbittest: stop node %s: %w", n.name, err)
	}
	select {
	case <-n.done:
		return nil
	case <-time.After(2 * time.Minute):
		return errors.New("rabbittest: the node did not exit 2 minutes after SIGTERM")
	}
}

// Kill kills the node's processes (SIGKILL to its process group) and waits
// for them to go.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
}

// Close kills the node, ends its epmd and removes its directory.
func (n *Node) Close() {
	n.Kill()
	if n.epmdCmd != nil && n.epmdCmd.Process != nil {
		n.epmdCmd.Process.Kill()
		n.epmdCmd.Wait()
	}
	os.RemoveAll(n.dir)
}

// URL is the AMQP URL of the default vhost, as guest.
func (n *Node) URL() string { return "amqp://guest:guest@127.0.0.1:" + strconv.Itoa(n.amqp) + "/" }

// AMQPSURL is the amqps URL of the default vhost, as guest; "" without
// Options.TLS.
func (n *Node) AMQPSURL() string {
	if n.amqps == 0 {
		return ""
	}
	return "amqps://guest:guest@localhost:" + strconv.Itoa(n.amqps) + "/"
}

// Port is the AMQP port.
func (n *Node) Port() int { return n.amqp }

// Name is the node name (rmq…@localhost).
func (n *Node) Name() string { return n.name }

// Dir is the node's directory: its data, logs and HOME.
func (n *Node) Dir() string { return n.dir }

// LogPath is the node's log file.
func (n *Node) LogPath() string { return filepath.Join(n.dir, "log", n.name+".log") }

// LogTail is the last n lines of the node's log (its stdout when there is
// no log yet).
func (n *Node) LogTail(lines int) string {
	b, err := os.ReadFile(n.LogPath())
	if err != nil {
		b, _ = os.ReadFile(filepath.Join(n.dir, "stdout.log"))
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// MemoryAlarm raises a memory alarm on the node (on) or clears it, by
// setting the memory high watermark far below what the node uses (or back
// to the default 0.4): the node then blocks publishing connections
// (connection.blocked) until the alarm clears.
func (n *Node) MemoryAlarm(on bool) error {
	watermark := "0.4"
	if on {
		watermark = "0.000001"
	}
	_, err := n.Ctl("set_vm_memory_high_watermark", watermark)
	return err
}
