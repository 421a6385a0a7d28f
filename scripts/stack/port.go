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

// OnFreePort starts a server with start on a free port, up to three times: a free port can be
// taken between the probe and the server's bind.
func OnFreePort[T any](start func(port int) (T, error)) (T, error) {
	var zero T
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return zero, err
		}
		s, err := start(port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return zero, lastErr
}
