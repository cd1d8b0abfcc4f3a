package kafkatest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// process is one running java process and its exit status.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // result of cmd.Wait, valid once done is closed
}

// java returns a command running class with the broker jars on the class
// path, in dir, with output appended to log.
func java(libs, dir string, log io.Writer, jvm []string, class string, args ...string) *exec.Cmd {
	full := append([]string{}, jvm...)
	full = append(full,
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+filepath.Join(dir, "log4j2.properties"),
		"-cp", filepath.Join(libs, "*"),
		class)
	cmd := exec.Command("java", append(full, args...)...)
	cmd.Dir = dir
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = procAttr()
	return cmd
}

// launch starts cmd and collects its exit status in the background.
func launch(cmd *exec.Cmd) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to the process group of p.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop sends SIGTERM and waits up to grace before sending SIGKILL.
func (p *process) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
	}
}

// kill sends SIGKILL and waits for the process to exit.
func (p *process) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// waitReady polls ready until it succeeds, the process exits, or timeout
// passes.
func waitReady(p *process, timeout time.Duration, ready func() error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = ready(); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("kafka exited during startup: %v", p.err)
		case <-deadline.C:
			return fmt.Errorf("kafka not ready after %s: %w", timeout, last)
		case <-tick.C:
		}
	}
}

// probe asks addr for its metadata (kadm, on a client of its own) and
// fails unless the answer lists a broker.
func probe(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl, err := probeClient(addr, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata response lists no broker")
	}
	return nil
}

// probeSASL sends one SaslHandshake request to addr, over TLS when useTLS
// is set, and checks that the answer lists every one of Mechanisms. It
// does not authenticate. The request is kmsg's: kadm has none, as a client
// sends SaslHandshake only while it authenticates.
func probeSASL(addr string, useTLS bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var tlsCfg *tls.Config
	if useTLS {
		// A readiness probe: whether the certificate verifies is the
		// client's business (and the test's), not the helper's.
		tlsCfg = &tls.Config{InsecureSkipVerify: true}
	}
	cl, err := probeClient(addr, tlsCfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = Mechanisms[0]
	res, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if res.ErrorCode != 0 {
		return fmt.Errorf("SaslHandshake: %v, mechanisms %v", kerr.ErrorForCode(res.ErrorCode), res.SupportedMechanisms)
	}
	for _, m := range Mechanisms {
		if !slices.Contains(res.SupportedMechanisms, m) {
			return fmt.Errorf("SaslHandshake lists %v, not %s", res.SupportedMechanisms, m)
		}
	}
	return nil
}

// probeClient is a franz-go client for one probe of addr (TLS with tlsCfg
// unless nil), which gives up at its context's deadline.
func probeClient(addr string, tlsCfg *tls.Config) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("kafkatest"), kgo.DialTimeout(2 * time.Second)}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	return kgo.NewClient(opts...)
}

// tail returns about the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const max = 32 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// portClash reports whether the log at path shows a failed bind, the one
// startup failure that choosing other ports can fix.
func portClash(path string) bool {
	return strings.Contains(tail(path, 400), "Address already in use")
}
