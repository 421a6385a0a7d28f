package stack

import (
	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
)

// NATSLogger adapts nats-server's logger to zap.
func NATSLogger(logger *zap.Logger) server.Logger {
	return natsLogger{logger.Sugar()}
}

type natsLogger struct{ l *zap.SugaredLogger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Infof(format, v...) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warnf(format, v...) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Errorf(format, v...) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Errorf(format, v...) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debugf(format, v...) }
func (n natsLogger) Tracef(format string, v ...any)  { n.l.Debugf(format, v...) }
