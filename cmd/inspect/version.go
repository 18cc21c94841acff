package main

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

var versionCmd = &command{
	name:    "version",
	args:    "",
	short:   "the module and Go versions, and the on-disk formats this build reads",
	minArgs: 0, maxArgs: 0,
	long: `Print the version of the filterstore module this inspect was built from
(from the build information: a tagged version, or "(devel)" with the VCS
revision when built in a checkout), the Go version, and the range of each
on-disk format version it reads: filter file headers, WAL segment headers,
the catalog, and its values (each filter's record in the catalog).

Example:

  inspect version`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error { return runVersion },
}

// Oldest on-disk format versions this build reads. The newest are the
// packages' exported constants where they exist (mmapbits.FormatVersion,
// wal.SegmentVersion); the store exports neither its catalog format nor
// the oldest versions, so they are restated here (store/catalog.go
// catalogFormat, mmapbits.DecodeHeader, wal's segmentVersion1).
const (
	oldestHeaderVersion  = 1
	oldestSegmentVersion = 1
	oldestCatalogFormat  = 1
	catalogFormat        = 3
	oldestMetaVersion    = 1
)

type formatRange struct {
	Oldest uint32 `json:"oldest"`
	Newest uint32 `json:"newest"` // the version written
}

type versionOut struct {
	Module   string      `json:"module"`
	Version  string      `json:"version"`
	Revision string      `json:"vcs_revision,omitempty"`
	Modified bool        `json:"vcs_modified,omitempty"`
	Go       string      `json:"go"`
	Header   formatRange `json:"filter_header_format"`
	Segment  formatRange `json:"wal_segment_format"`
	Catalog  formatRange `json:"catalog_format"`
	Meta     formatRange `json:"filter_value_format"`
}

func runVersion(e *env, _ []string) error {
	out := versionOut{Module: "github.com/filterstore/filterstore", Version: "unknown", Go: runtime.Version(),
		Header:  formatRange{oldestHeaderVersion, mmapbits.FormatVersion},
		Segment: formatRange{oldestSegmentVersion, wal.SegmentVersion},
		Catalog: formatRange{oldestCatalogFormat, catalogFormat},
		Meta:    formatRange{oldestMetaVersion, format.MetaVersion}}
	if bi, ok := debug.ReadBuildInfo(); ok {
		out.Module, out.Version = bi.Main.Path, bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Revision = s.Value
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
	}
	if out.Version == "" {
		out.Version = "(devel)"
	}
	if e.json {
		return writeJSON(e.stdout, out)
	}
	rev := ""
	if out.Revision != "" {
		rev = ", revision " + out.Revision
		if out.Modified {
			rev += " (modified)"
		}
	}
	k := &kv{}
	k.add("module", "%s %s%s", out.Module, out.Version, rev)
	k.add("go", "%s %s/%s", out.Go, runtime.GOOS, runtime.GOARCH)
	k.add("filter header", "format versions %s", out.Header)
	k.add("WAL segment", "format versions %s", out.Segment)
	k.add("catalog", "format versions %s", out.Catalog)
	k.add("catalog value", "format versions %s", out.Meta)
	return k.write(e.stdout)
}

func (r formatRange) String() string {
	return fmt.Sprintf("%d..%d (writes %d)", r.Oldest, r.Newest, r.Newest)
}
