package storetest

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// CutProxy is a TCP proxy in front of a store's server that breaks the connection of chosen GETs
// after some bytes of their answer: a download lost mid-way, on the wire, with a real client and
// server on either side. It reads the request line of each connection only, so its clients make
// one request per connection ([CutProxy.Transport]).
type CutProxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	gets  map[string]int // GETs by the request's path
	cut   string         // cut GETs whose path ends in this
	times int            // how many more to cut
	after int64          // bytes of answer (head and body) let through first
	onCut func()         // called before a cut
}

// NewCutProxy starts a proxy to target (host:port), stopped when the test ends.
func NewCutProxy(t testing.TB, target string) *CutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{target: target, ln: ln, gets: map[string]int{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

// Transport dials the proxy for the target's address, and every other address directly, one
// request per connection.
func (p *CutProxy) Transport() *http.Transport {
	var d net.Dialer
	return &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == p.target {
				addr = p.ln.Addr().String()
			}
			return d.DialContext(ctx, network, addr)
		},
	}
}

// Cut breaks the next times GETs of a path ending in suffix after `after` bytes of their answer,
// calling onCut (nil: nothing) before each break.
func (p *CutProxy) Cut(suffix string, times int, after int64, onCut func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.times, p.after, p.onCut = suffix, times, after, onCut
}

// GETs counts the GETs so far of paths (unescaped) ending in suffix.
func (p *CutProxy) GETs(suffix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for path, c := range p.gets {
		if strings.HasSuffix(path, suffix) {
			n += c
		}
	}
	return n
}

func (p *CutProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	in := bufio.NewReader(client)
	line, err := in.ReadString('\n')
	if err != nil {
		return
	}
	after, onCut, cut := p.request(line)
	go func() {
		if _, err := io.WriteString(server, line); err == nil {
			_, _ = io.Copy(server, in)
		}
	}()
	if !cut {
		_, _ = io.Copy(client, server)
		return
	}
	if _, err := io.CopyN(client, server, after); err == nil && onCut != nil {
		onCut()
	}
}

// request counts a request by its line ("GET /path?query HTTP/1.1") and says whether to cut it.
func (p *CutProxy) request(line string) (after int64, onCut func(), cut bool) {
	method, target, _ := strings.Cut(line, " ")
	if method != http.MethodGet {
		return 0, nil, false
	}
	target, _, _ = strings.Cut(target, " ")
	path, _, _ := strings.Cut(target, "?")
	if unescaped, err := url.PathUnescape(path); err == nil {
		path = unescaped // a key's "/" may be sent as %2F
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gets[path]++
	if p.times == 0 || !strings.HasSuffix(path, p.cut) {
		return 0, nil, false
	}
	p.times--
	return p.after, p.onCut, true
}
