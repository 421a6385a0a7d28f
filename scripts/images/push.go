package images

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ParseReference parses an image reference ("ghcr.io/org/name:tag", "name@sha256:…"). A
// registry on loopback (localhost, 127.0.0.0/8, ::1) is spoken to in plain HTTP: a test's or
// a node's local registry has no certificate.
func ParseReference(s string) (name.Reference, error) {
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", s, err)
	}
	if loopback(ref.Context().RegistryStr()) {
		if ref, err = name.ParseReference(s, name.Insecure); err != nil {
			return nil, fmt.Errorf("image reference %q: %w", s, err)
		}
	}
	return ref, nil
}

func loopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Push writes imgs to their registries, each blob once (the base layer is shared), with the
// credentials of the Docker config (~/.docker/config.json, $DOCKER_CONFIG, its credential
// helpers) through authn.DefaultKeychain. opts come after those defaults, so that a test can
// pass another transport or authenticator. The digest a registry then serves for a reference
// is its image's Digest().
func Push(ctx context.Context, imgs map[name.Reference]v1.Image, opts ...remote.Option) error {
	todo := make(map[name.Reference]remote.Taggable, len(imgs))
	for ref, img := range imgs {
		todo[ref] = img
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.MultiWrite(todo, opts...); err != nil {
		return fmt.Errorf("pushing %d images: %w", len(imgs), err)
	}
	return nil
}
