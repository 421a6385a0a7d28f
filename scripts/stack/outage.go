package stack

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// OutageProxy stands between housekeeper and one dependency (an API server, a store) and takes
// the dependency away from it alone: Down refuses new connections (nothing listens on the
// address) and cuts the open ones, Up listens again on the same address.
type OutageProxy struct {
	target string
	addr   string

	mu    sync.Mutex
	l     net.Listener // nil while down
	conns map[net.Conn]struct{}
}

// NewOutageProxy listens on a loopback port and forwards every connection to target
// (host:port) until Down.
func NewOutageProxy(target string) (*OutageProxy, error) {
	p := &OutageProxy{target: target, conns: map[net.Conn]struct{}{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = l.Addr().String()
	p.serve(l)
	return p, nil
}

// Addr is the proxy's host:port, where clients go instead of the target's.
func (p *OutageProxy) Addr() string { return p.addr }

// Down refuses new connections and cuts every open one; it also stops the proxy for good.
func (p *OutageProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		_ = p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Up listens on the proxy's address again.
func (p *OutageProxy) Up() error {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("listening on the proxy's address %s again: %w", p.addr, err)
	}
	p.serve(l)
	return nil
}

func (p *OutageProxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			client, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			go p.forward(client)
		}
	}()
}

func (p *OutageProxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		return // went down meanwhile
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
	_ = client.Close()
	_ = server.Close()
}

// track records an open pair of connections; while down it closes them instead.
func (p *OutageProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}
