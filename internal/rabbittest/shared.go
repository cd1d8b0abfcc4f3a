package rabbittest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// Shared is one node for a test package's tests, started by the first test
// that asks for it; the package's TestMain calls Close after m.Run.
type Shared struct {
	Options Options // the node's options, set before the first Node

	once sync.Once
	node *Node
	err  error
}

// Node returns the package's node, starting it on first use. It skips t
// while the service tier is off, and fails t when the node cannot start.
func (s *Shared) Node(t testing.TB) *Node {
	t.Helper()
	testtier.Need(t)
	s.once.Do(func() { s.node, s.err = Start(s.Options) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.node
}

// Close stops the node, if one was started.
func (s *Shared) Close() {
	if s.node != nil {
		s.node.Close()
	}
}

// Run runs the package's tests and then closes the node: a TestMain is
// os.Exit(shared.Run(m)).
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	s.Close()
	return code
}

// Own starts a node for t alone, for a test that restarts it, raises an
// alarm on it or needs options of its own (TLS); it closes at t's end,
// taking any alarm with it. It skips t while the service tier is off, and
// fails t when the node cannot start.
func Own(t testing.TB, opts Options) *Node {
	t.Helper()
	testtier.Need(t)
	n, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// TLSFilesOf writes a server certificate for localhost and 127.0.0.1,
// issued by ca, its key and ca's certificate into a directory of t's, for
// Options.TLS.
func TLSFilesOf(t testing.TB, ca *testca.CA) *TLSFiles {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, "localhost", "localhost", "127.0.0.1")
	dir := t.TempDir()
	files := &TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	for path, b := range map[string][]byte{files.CA: ca.PEM, files.Cert: certPEM, files.Key: keyPEM} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}
