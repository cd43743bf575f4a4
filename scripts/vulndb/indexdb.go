//go:build ignore

// indexdb turns the OSV entries that the golang.org/x/vulndb module ships
// (data/osv/GO-*.json) into a Go vulnerability database in the "v1" layout
// that `govulncheck -db file:///DIR` reads:
//
//	DIR/index/db.json       {"modified": newest entry's modified}
//	DIR/index/modules.json  [{"path", "vulns": [{"id", "modified", "fixed"}]}]
//	DIR/index/vulns.json    [{"id", "modified", "aliases"}]
//	DIR/ID/GO-YYYY-NNNN.json
//
// It does what the module's own cmd/indexdb does (internal/database's
// RawLoad + Write), with the standard library only, so that it builds in
// seconds instead of pulling that module's ~900 MB of cloud dependencies.
// The index files it writes are byte-identical to cmd/indexdb's; entries are
// the OSV files compacted. The .json.gz twins that an HTTP server needs are
// not written: a file:// database is read as plain .json.
//
// It is not part of the module's packages (build tag ignore):
//
//	go run scripts/vulndb/indexdb.go -vulns $VULNDB/data/osv -out DIR
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// entry is the part of an OSV entry that the index needs.
type entry struct {
	ID       string   `json:"id"`
	Modified string   `json:"modified"`
	Aliases  []string `json:"aliases"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
		Ranges []struct {
			Type   string `json:"type"`
			Events []struct {
				Introduced string `json:"introduced"`
				Fixed      string `json:"fixed"`
			} `json:"events"`
		} `json:"ranges"`
	} `json:"affected"`
}

type dbMeta struct {
	Modified string `json:"modified"`
}

type module struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

type moduleVuln struct {
	ID       string `json:"id"`
	Modified string `json:"modified"`
	Fixed    string `json:"fixed,omitempty"`
}

type vuln struct {
	ID       string   `json:"id"`
	Modified string   `json:"modified"`
	Aliases  []string `json:"aliases,omitempty"`
}

func main() {
	vulnsDir := flag.String("vulns", "", "directory of OSV JSON files (the vulndb module's data/osv)")
	outDir := flag.String("out", "", "directory to write the database to (must not exist)")
	flag.Parse()
	if *vulnsDir == "" || *outDir == "" {
		log.Fatal("usage: indexdb -vulns DIR -out DIR")
	}
	if _, err := os.Stat(*outDir); err == nil {
		log.Fatalf("%s exists", *outDir)
	}
	if err := run(*vulnsDir, *outDir); err != nil {
		log.Fatal(err)
	}
}

func run(vulnsDir, outDir string) error {
	if err := os.MkdirAll(filepath.Join(outDir, "index"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(outDir, "ID"), 0o755); err != nil {
		return err
	}

	var (
		newest  time.Time
		modules = map[string]*module{}
		vulns   []vuln
		seen    = map[string]bool{}
	)
	// WalkDir visits files in lexical order, as cmd/indexdb's RawLoad does,
	// which fixes the order of a module's repeated IDs below.
	err := filepath.WalkDir(vulnsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() == "index.json" || filepath.Ext(d.Name()) != ".json" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		if e.ID == "" || d.Name() != e.ID+".json" {
			return fmt.Errorf("%s: entry id %q does not match the file name", path, e.ID)
		}
		if seen[e.ID] {
			return fmt.Errorf("id %q appears twice", e.ID)
		}
		seen[e.ID] = true
		modified, err := time.Parse(time.RFC3339, e.Modified)
		if err != nil {
			return fmt.Errorf("%s: modified: %v", path, err)
		}
		if modified.After(newest) {
			newest = modified
		}
		mod := modified.UTC().Format(time.RFC3339)

		vulns = append(vulns, vuln{ID: e.ID, Modified: mod, Aliases: e.Aliases})
		for _, a := range e.Affected {
			m := modules[a.Package.Name]
			if m == nil {
				m = &module{Path: a.Package.Name, Vulns: []moduleVuln{}}
				modules[a.Package.Name] = m
			}
			v := moduleVuln{ID: e.ID, Modified: mod}
			// The latest fix of the SEMVER ranges, or none if the
			// vulnerability is introduced again after it
			// (vulndb's osvutils.LatestFixed).
			for _, r := range a.Ranges {
				if r.Type != "SEMVER" {
					continue
				}
				for _, ev := range r.Events {
					if ev.Fixed != "" && semverCompare(v.Fixed, ev.Fixed) < 0 {
						v.Fixed = ev.Fixed
					}
				}
				for _, ev := range r.Events {
					if ev.Introduced != "" && ev.Introduced != "0" && semverCompare(v.Fixed, ev.Introduced) < 0 {
						v.Fixed = ""
						break
					}
				}
			}
			m.Vulns = append(m.Vulns, v)
		}

		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		return os.WriteFile(filepath.Join(outDir, "ID", e.ID+".json"), compact.Bytes(), 0o644)
	})
	if err != nil {
		return err
	}
	if len(vulns) == 0 {
		return fmt.Errorf("no OSV entries in %s", vulnsDir)
	}

	mods := make([]*module, 0, len(modules))
	for _, m := range modules {
		sort.SliceStable(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	sort.SliceStable(vulns, func(i, j int) bool { return vulns[i].ID < vulns[j].ID })

	for name, v := range map[string]any{
		"db.json":      dbMeta{Modified: newest.UTC().Format(time.RFC3339)},
		"modules.json": mods,
		"vulns.json":   vulns,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(outDir, "index", name), b, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("indexdb: %d entries, %d modules, newest modified %s\n",
		len(vulns), len(mods), newest.UTC().Format(time.RFC3339))
	return nil
}

// semverCompare compares unprefixed semantic versions as
// golang.org/x/mod/semver.Compare does with a "v" put in front:
// an invalid version (such as "") sorts before every valid one,
// "1" and "1.2" stand for "1.0.0" and "1.2.0", build metadata is ignored.
func semverCompare(a, b string) int {
	pa, okA := parseSemver(a)
	pb, okB := parseSemver(b)
	switch {
	case !okA && !okB:
		return 0
	case !okA:
		return -1
	case !okB:
		return 1
	}
	for i := 0; i < 3; i++ {
		if c := compareNum(pa.num[i], pb.num[i]); c != 0 {
			return c
		}
	}
	return comparePrerelease(pa.pre, pb.pre)
}

type semver struct {
	num [3]string
	pre string // without the leading '-'
}

func parseSemver(v string) (semver, bool) {
	var p semver
	build := false
	if i := strings.IndexByte(v, '+'); i >= 0 {
		if !validIdents(v[i+1:], false) {
			return p, false
		}
		v, build = v[:i], true
	}
	short := false
	if i := strings.IndexByte(v, '-'); i >= 0 {
		p.pre = v[i+1:]
		if !validIdents(p.pre, true) {
			return p, false
		}
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) > 3 {
		return p, false
	}
	for i := range p.num {
		if i >= len(parts) {
			short = true
			p.num[i] = "0"
			continue
		}
		if !validNum(parts[i]) {
			return p, false
		}
		p.num[i] = parts[i]
	}
	if short && (p.pre != "" || build) {
		return p, false // x/mod/semver allows v1 and v1.2 only bare
	}
	return p, true
}

func validNum(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func validIdents(s string, pre bool) bool {
	if s == "" {
		return false
	}
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		digits := true
		for _, c := range id {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				digits = false
			default:
				return false
			}
		}
		if pre && digits && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// compareNum compares decimal strings without leading zeros.
func compareNum(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func comparePrerelease(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := compareIdent(as[i], bs[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(as) < len(bs):
		return -1
	case len(as) > len(bs):
		return 1
	}
	return 0
}

func compareIdent(a, b string) int {
	na, nb := isNum(a), isNum(b)
	switch {
	case na && nb:
		return compareNum(a, b)
	case na:
		return -1
	case nb:
		return 1
	}
	return strings.Compare(a, b)
}

func isNum(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
