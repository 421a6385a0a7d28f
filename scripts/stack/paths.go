// Package stack starts the real components housekeeper runs against — kube-apiserver and etcd
// (through controller-runtime's envtest), nats-server with JetStream (embedded) and Azurite —
// on free loopback ports. The local stack (make run) and the test-support package use it.
package stack

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotInstalled is returned when a component's binaries are missing from the cache.
var ErrNotInstalled = errors.New("not installed")

// RepoRoot returns the directory holding go.mod, searched upwards from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// CacheDir is where the built and downloaded components live, outside the repository; the
// install scripts use the same rule.
func CacheDir() (string, error) {
	if dir := os.Getenv("HOUSEKEEPER_CACHE"); dir != "" {
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "housekeeper"), nil
}

// Versions reads the pins in scripts/versions.env.
func Versions() (map[string]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(root, "scripts", "versions.env"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	versions := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("scripts/versions.env: %q is not KEY=VALUE", line)
		}
		versions[key] = value
	}
	return versions, scanner.Err()
}

// ControlPlaneDir is the directory with kube-apiserver and etcd at the pinned versions, as
// scripts/install-controlplane.sh builds them.
func ControlPlaneDir() (string, error) {
	if dir := os.Getenv("HOUSEKEEPER_CONTROLPLANE"); dir != "" {
		return dir, nil
	}
	return installed("scripts/install-controlplane.sh", func(v map[string]string) string {
		return filepath.Join("controlplane", fmt.Sprintf("kube-%s-etcd-%s", v["KUBERNETES_VERSION"], v["ETCD_VERSION"]))
	}, "kube-apiserver", "etcd")
}

// NATSServerBinary is nats-server built as a program by scripts/install-nats.sh, at the version
// go.mod pins.
func NATSServerBinary() (string, error) {
	version, err := requiredVersion("github.com/nats-io/nats-server/v2")
	if err != nil {
		return "", err
	}
	dir, err := installed("scripts/install-nats.sh", func(map[string]string) string {
		return filepath.Join("nats", "nats-server-"+version)
	}, "nats-server")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "nats-server"), nil
}

// KEDAScalerBinary is test/keda — KEDA's nats-jetstream scaler as a command — built by
// scripts/install-keda.sh, keyed by the hash of its sources.
func KEDAScalerBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		data, err := os.ReadFile(filepath.Join(root, "test", "keda", name))
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	dir, err := installed("scripts/install-keda.sh", func(map[string]string) string {
		return filepath.Join("keda", "kedascaler-"+key)
	}, "kedascaler")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kedascaler"), nil
}

// requiredVersion is the version of module that the repository's go.mod requires.
func requiredVersion(module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return RequiredVersion(filepath.Join(root, "go.mod"), module)
}

// RequiredVersion is the version of module that the go.mod file gomod requires.
func RequiredVersion(gomod, module string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(fields) >= 2 && fields[0] == module {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s requires no %s", gomod, module)
}

// installed is the cache directory an install script fills with bins, at the path dir derives
// from the pinned versions; ErrNotInstalled, naming the script, while a binary is missing.
func installed(script string, dir func(versions map[string]string) string, bins ...string) (string, error) {
	versions, err := Versions()
	if err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(cache, dir(versions))
	for _, bin := range bins {
		if _, err := os.Stat(filepath.Join(path, bin)); err != nil {
			return "", fmt.Errorf("%s %w in %s: run `make tools` (%s)", bin, ErrNotInstalled, path, script)
		}
	}
	return path, nil
}

// AzuriteBinary is the azurite-blob executable installed by scripts/install-azurite.sh, keyed
// by the hash of the lockfile that pins it.
func AzuriteBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(root, "scripts", "azurite", "package-lock.json"))
	if err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	bin := filepath.Join(cache, "azurite", hex.EncodeToString(sum[:])[:16], "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("azurite %w at %s: run `make tools` (scripts/install-azurite.sh)", ErrNotInstalled, bin)
	}
	return bin, nil
}
