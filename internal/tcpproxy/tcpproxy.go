package tcpproxy

import (
	"errors"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the connection to the target.
const dialTimeout = 5 * time.Second

// bufSize is how much one direction of a connection reads at a time, and so
// the most a blackholed direction absorbs beyond the kernel's buffers.
const bufSize = 32 << 10

// Proxy forwards TCP connections to a target; see the package comment.
type Proxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu         sync.Mutex
	target     string
	blackholed bool
	resumed    chan struct{} // closed by Resume; a new one per Blackhole
	links      map[*link]struct{}
	accepted   int
	closed     bool
}

// New listens on 127.0.0.1:0 and forwards connections to target
// ("host:port"; "" until SetTarget).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's listening address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget changes where new connections go, e.g. once a server started
// that advertises the proxy's address.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Blackhole stops forwarding in both directions, keeping every socket open.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.blackholed {
		p.blackholed = true
		p.resumed = make(chan struct{})
	}
}

// Resume forwards again, starting with what was held back.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blackholed {
		p.blackholed = false
		close(p.resumed)
	}
}

// CutAll closes every open connection on both sides and returns how many
// there were. New connections are still accepted.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// Accepted counts the connections accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Open counts the connections open now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.accepted++
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(l)
	}
}

// serve connects l to the target (once the path is open) and copies both ways.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	// A blackholed path does not reach the server: the client sees an open
	// connection that never answers.
	if !p.pass(l.done) {
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		return
	}
	if !l.setUpstream(up) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, up, l.client) }()
	go func() { defer wg.Done(); p.pipe(l, l.client, up) }()
	wg.Wait()
}

// pipe copies src to dst, holding bytes (and the end of the stream) back
// while the proxy is blackholed. Either direction ending closes the link.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	defer l.close()
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if !p.pass(l.done) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits while the proxy is blackholed; it returns false when the link
// was closed meanwhile.
func (p *Proxy) pass(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		blackholed, resumed := p.blackholed, p.resumed
		p.mu.Unlock()
		if !blackholed {
			select {
			case <-done:
				return false
			default:
				return true
			}
		}
		select {
		case <-resumed:
		case <-done:
			return false
		}
	}
}

// link is one proxied connection: the accepted client socket and the socket
// to the target.
type link struct {
	client net.Conn
	done   chan struct{}

	mu       sync.Mutex
	upstream net.Conn
	closed   bool
}

// setUpstream attaches the target socket; false (and up closed) when the
// link was closed meanwhile.
func (l *link) setUpstream(up net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		up.Close()
		return false
	}
	l.upstream = up
	return true
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	l.client.Close()
	if l.upstream != nil {
		l.upstream.Close()
	}
}
