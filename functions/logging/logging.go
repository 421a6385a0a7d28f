// Package logging builds the zap logger every housekeeper binary uses and routes the logs of
// client-go (klog) and controller-runtime (logr) into it, so one process writes one format.
package logging

import (
	"flag"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Options configure the logger.
type Options struct {
	// Level is debug, info, warn or error.
	Level string
	// Format is json (production) or console (humans).
	Format string
}

// New returns a zap logger for opts.
func New(opts Options) (*zap.Logger, error) {
	level := zapcore.InfoLevel
	if opts.Level != "" {
		if err := level.Set(opts.Level); err != nil {
			return nil, fmt.Errorf("log level %q: want debug, info, warn or error", opts.Level)
		}
	}
	var cfg zap.Config
	switch opts.Format {
	case "", "json":
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	case "console":
		cfg = zap.NewDevelopmentConfig()
	default:
		return nil, fmt.Errorf("log format %q: want json or console", opts.Format)
	}
	cfg.Level = zap.NewAtomicLevelAt(level)
	return cfg.Build()
}

// RouteLibraries sends klog (client-go: informers, leader election, rest client) and
// controller-runtime's logr into logger.
func RouteLibraries(logger *zap.Logger) logr.Logger {
	sink := zapr.NewLogger(logger)
	klog.SetLogger(sink.WithName("klog"))
	ctrllog.SetLogger(sink.WithName("controller-runtime"))
	return sink
}

// BindFlags registers the options as flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.Format, "log-format", "json", "log format: json or console")
}
