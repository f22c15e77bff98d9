package cache

import (
	"net"
	"sync"
	"testing"
)

// freezeProxy is a TCP proxy on loopback between a client and a Redis server that a test can
// freeze, wholly or one connection at a time: a frozen connection forwards nothing in either
// direction and keeps its sockets open (new connections are accepted, and hear nothing
// either while the whole proxy is frozen). To the client this is a server that is up and
// silent, like a SIGSTOPped server or a stalled network path, while the server itself keeps
// serving everyone else, so another client can go on writing.
type freezeProxy struct {
	addr     string
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	changed *sync.Cond // signalled on every freeze, thaw and close
	all     bool       // the whole proxy is frozen
	frozen  map[int]bool
	n       int // connections accepted
	conns   []net.Conn
	closed  bool
	wg      sync.WaitGroup
}

// newFreezeProxy starts a proxy to upstream, forwarding, closed when the test ends.
func newFreezeProxy(t testing.TB, upstream string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{addr: ln.Addr().String(), upstream: upstream, ln: ln, frozen: map[int]bool{}}
	p.changed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// freeze stops forwarding on every connection; thaw resumes it.
func (p *freezeProxy) freeze() { p.set(func() { p.all = true }) }
func (p *freezeProxy) thaw()   { p.set(func() { p.all = false }) }

// freezeConn stops forwarding on the i-th connection accepted (from 0); thawConn resumes it.
func (p *freezeProxy) freezeConn(i int) { p.set(func() { p.frozen[i] = true }) }
func (p *freezeProxy) thawConn(i int)   { p.set(func() { delete(p.frozen, i) }) }

// accepted returns the number of connections accepted so far.
func (p *freezeProxy) accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *freezeProxy) set(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
	p.changed.Broadcast()
}

// wait blocks while connection i is frozen; it reports false once the proxy is closed.
func (p *freezeProxy) wait(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && (p.all || p.frozen[i]) {
		p.changed.Wait()
	}
	return !p.closed
}

// track records c for close, and reports false (closing c) if the proxy is closed.
func (p *freezeProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *freezeProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(down) {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			down.Close()
			continue
		}
		if !p.track(up) {
			return
		}
		p.mu.Lock()
		i := p.n
		p.n++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(i, up, down)
		go p.pipe(i, down, up)
	}
}

// pipe copies src to dst, holding each chunk while connection i is frozen.
func (p *freezeProxy) pipe(i int, dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(i) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a closed socket
			return
		}
	}
}

// close stops the proxy, closing every connection, and waits for its goroutines.
func (p *freezeProxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.changed.Broadcast()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
