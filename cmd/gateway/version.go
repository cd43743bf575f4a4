package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Run prints one line: "gateway VERSION (GOVERSION, OS/ARCH)".
func (c *versionCommand) Run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			fmt.Fprintln(c.main.Stdout, "Usage: gateway version")
			return nil
		}
		return usagef("version: unexpected argument %q", args[0])
	}
	fmt.Fprintf(c.main.Stdout, "gateway %s (%s, %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// buildVersion prefers the -ldflags version and falls back to the module
// version `go install ...@vX` records, so that both kinds of build report
// something better than "dev".
func buildVersion() string {
	if version != "dev" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	// A build from a checkout: name the commit it was built from.
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) >= 12 {
		return "dev-" + rev[:12] + dirty
	}
	return version
}
