package teststack

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Proxy forwards TCP connections to MariaDB. It can cut them all, and
// refuse new ones, to play a database outage; and it can fault COMMITs
// (FaultCommits): forward one and drop the connection before the server's
// OK reaches the client (the transaction committed, the client sees an
// error), or drop the connection instead of forwarding it (the server
// rolls back).
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup

	faultEvery atomic.Int64 // fault every n-th COMMIT; 0: none
	stallUntil atomic.Int64 // COMMITs are held until this time (unix ns)
	commits    atomic.Int64
	// AppliedLost counts COMMITs forwarded whose OK was dropped;
	// NotForwarded those dropped before the server saw them.
	AppliedLost, NotForwarded atomic.Int64
}

// NewProxy listens on a loopback port and forwards to target.
func NewProxy(t testing.TB, target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// DSN rewrites dsn to go through the proxy.
func (p *Proxy) DSN(dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		p.t.Fatal(err)
	}
	c.Addr = p.ln.Addr().String()
	return c.FormatDSN()
}

// FaultCommits faults every n-th COMMIT from now on (0 stops), alternating
// the two faults: odd ones are forwarded and their answer lost, even ones
// never reach the server.
func (p *Proxy) FaultCommits(n int) { p.faultEvery.Store(int64(n)) }

// StallCommits holds every COMMIT for d from now before forwarding it: a
// database that answers reads but is slow to make anything durable (a
// saturated disk). Statements before the COMMIT go through.
func (p *Proxy) StallCommits(d time.Duration) { p.stallUntil.Store(time.Now().Add(d).UnixNano()) }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		l := &link{p: p, client: c, server: up}
		p.wg.Go(l.clientToServer)
		p.wg.Go(l.serverToClient)
	}
}

// link is one proxied connection. MySQL's protocol is request-response:
// after forwarding a COMMIT, the next packet from the server is its answer.
type link struct {
	p              *Proxy
	client, server net.Conn
	dropAnswer     atomic.Bool
	once           sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		l.client.Close()
		l.server.Close()
		l.p.mu.Lock()
		delete(l.p.conns, l.client)
		delete(l.p.conns, l.server)
		l.p.mu.Unlock()
	})
}

// clientToServer forwards packets, faulting COMMITs.
func (l *link) clientToServer() {
	defer l.close()
	for {
		pkt, err := readPacket(l.client)
		if err != nil {
			return
		}
		if isCommit(pkt) {
			if d := time.Until(time.Unix(0, l.p.stallUntil.Load())); d > 0 {
				time.Sleep(d)
			}
			if every := l.p.faultEvery.Load(); every > 0 {
				if n := l.p.commits.Add(1); n%every == 0 {
					if (n/every)%2 == 1 {
						l.p.AppliedLost.Add(1)
						l.dropAnswer.Store(true)
					} else {
						l.p.NotForwarded.Add(1)
						return // cut instead of forwarding: the server rolls back
					}
				}
			}
		}
		if _, err := l.server.Write(pkt); err != nil {
			return
		}
	}
}

// serverToClient forwards packets, except the answer to a COMMIT whose
// answer is to be lost: then the connection is cut.
func (l *link) serverToClient() {
	defer l.close()
	for {
		pkt, err := readPacket(l.server)
		if err != nil {
			return
		}
		if l.dropAnswer.Load() {
			return // the server applied the COMMIT; the client never hears it
		}
		if _, err := l.client.Write(pkt); err != nil {
			return
		}
	}
}

// readPacket reads one MySQL packet: a 3-byte little-endian length, a
// sequence byte, the payload.
func readPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	pkt := make([]byte, 4+n)
	copy(pkt, hdr[:])
	if _, err := io.ReadFull(r, pkt[4:]); err != nil {
		return nil, err
	}
	return pkt, nil
}

// isCommit reports a COM_QUERY packet whose text is COMMIT.
func isCommit(pkt []byte) bool {
	const comQuery = 0x03
	if len(pkt) < 5 || pkt[4] != comQuery {
		return false
	}
	return bytes.EqualFold(bytes.TrimSpace(pkt[5:]), []byte("COMMIT"))
}

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
