package main

import (
	"fmt"
	"runtime/debug"
)

// buildInfo is what the binary knows of its own build.
type buildInfo struct {
	Version   string // module version, "(devel)" for a build from a work tree
	Commit    string // VCS revision, "" when the build recorded none
	Time      string // commit time
	Modified  bool   // the work tree had changes
	GoVersion string
}

// Stamped by the release build (scripts/release.sh) with -ldflags -X, which
// builds with -buildvcs=false so that the bytes depend on the sources alone.
var (
	stampVersion  string // "v0.1.0"
	stampCommit   string // the commit's full hash
	stampModified string // "true" when the work tree had changes
)

func readBuildInfo() buildInfo {
	bi := readModuleInfo()
	if stampVersion != "" {
		bi.Version = stampVersion
	}
	if stampCommit != "" {
		bi.Commit, bi.Modified = stampCommit, stampModified == "true"
	}
	return bi
}

func readModuleInfo() buildInfo {
	bi := buildInfo{Version: "(devel)"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	bi.GoVersion = info.GoVersion
	if v := info.Main.Version; v != "" {
		bi.Version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.Commit = s.Value
		case "vcs.time":
			bi.Time = s.Value
		case "vcs.modified":
			bi.Modified = s.Value == "true"
		}
	}
	return bi
}

// moduleVersion is the version the server announces at initialisation.
func moduleVersion() string {
	v := readBuildInfo().Version
	if v == "(devel)" {
		return "devel"
	}
	return v
}

func (b buildInfo) String() string {
	commit := "unknown commit"
	if b.Commit != "" {
		commit = "commit " + b.Commit
		if b.Time != "" {
			commit += " " + b.Time
		}
		if b.Modified {
			commit += " (modified)"
		}
	}
	s := "memgate " + b.Version + ", " + commit
	if b.GoVersion != "" {
		s += ", " + b.GoVersion
	}
	return s
}

type versionCmd struct{}

func (c *versionCmd) Run(a *app) error {
	_, err := fmt.Fprintln(a.stdout, readBuildInfo())
	return err
}
