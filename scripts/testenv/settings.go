package testenv

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// EnvInt is the positive number in the environment variable name (a benchmark's or a suite's
// setting), or def when it is unset; anything else fails tb, naming the variable.
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// EnvDuration is the positive duration in the environment variable name, or def when it is
// unset; anything else fails tb, naming the variable.
func EnvDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}
