// Command release is `make release`: housekeeper's images and chart pushed to a registry, and
// the garden's registration for them written (package release).
//
//	go run ./scripts/cmd/release -version 0.1.0 -registry ghcr.io/housekeeper-dev -o .local/release
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/housekeeper-dev/housekeeper/scripts/images"
	"github.com/housekeeper-dev/housekeeper/scripts/release"
)

func main() {
	var o release.Options
	var only string
	flag.StringVar(&o.Version, "version", "", "the release, without the v (must be infra/chart/Chart.yaml's version and appVersion and functions/version.Version)")
	flag.StringVar(&o.Registry, "registry", "", "the images' registry and path: <registry>/<image>:v<version>")
	flag.StringVar(&o.ChartRepository, "chart-repository", "", "the chart's repository: <chart-repository>/housekeeper:<version> (default <registry>/charts)")
	flag.StringVar(&o.OutDir, "o", ".local/release", "the directory for the registrations and the chart archive")
	flag.StringVar(&only, "only", "", "publish only these images, comma-separated (of "+strings.Join(images.Names(images.Deployables()), ", ")+"); the registration's must be among them")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "GOARCH of the images (GOOS is linux)")
	flag.BoolVar(&o.AllowDirty, "allow-dirty", false, "release a work tree with uncommitted changes (the revision label gets -dirty)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "[release] error: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if only != "" {
		for _, n := range strings.Split(only, ",") {
			o.Only = append(o.Only, strings.TrimSpace(n))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := release.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "[release] error:", err)
		os.Exit(1)
	}
}
