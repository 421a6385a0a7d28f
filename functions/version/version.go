// Package version is the release of housekeeper that the binaries report (housekeeper
// --version, housekeeper-bridge --version): the chart's appVersion (infra/chart/Chart.yaml),
// whose images `make images` tags v<Version> by default. The chart and the images are released
// together; a test (functions/cmd) keeps Version equal to the appVersion and checks what the
// images `make images` builds report.
package version

// Version is this source tree's release, without the image tag's leading v. A build may set
// it with -ldflags "-X github.com/housekeeper-dev/housekeeper/functions/version.Version=…".
var Version = "0.1.0"

// String is what --version prints for the binary named name: "<name> <Version>".
func String(name string) string { return name + " " + Version }
