package stack

import "net"

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now, for a server the stack
// starts: the one way every harness picks a port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
