package rabbittest

import (
	"sync"
	"testing"

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
