package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// uploadState is the small file that remembers an unfinished upload of a
// local file between runs: its tus URL, with the file's absolute path,
// size and modification time and the admin URL it went to. It lives in
// the user's cache directory (os.UserCacheDir, so $XDG_CACHE_HOME or
// ~/.cache on Linux) under dlgate/uploads/, one per file path (its name
// is the SHA-256 of the path), mode 0600 (the URL names an upload the
// admin token can write to), and is removed once the upload is done. A
// state whose size, time or admin URL differ from the file's now is of
// another upload: its upload is ended and a new one begins.
type uploadState struct {
	file string // the file as the command named it
	path string // of the state file; "" without a cache directory
	want stateDoc
	err  error // why there is no state file
}

type stateDoc struct {
	URL      string    `json:"url"`
	File     string    `json:"file"`
	Size     int64     `json:"size"`
	ModTime  time.Time `json:"mtime"`
	AdminURL string    `json:"admin_url"`
}

func (c *linksCommand) uploadState(file string, fi os.FileInfo, adminURL string) (*uploadState, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	st := &uploadState{file: file, want: stateDoc{File: abs, Size: fi.Size(), ModTime: fi.ModTime().UTC(), AdminURL: adminURL}}
	dir, err := c.cacheDir()
	if err != nil {
		st.err = err
		return st, nil
	}
	sum := sha256.Sum256([]byte(abs))
	st.path = filepath.Join(dir, "dlgate", "uploads", hex.EncodeToString(sum[:16])+".json")
	return st, nil
}

// cacheDir is os.UserCacheDir, reading XDG_CACHE_HOME from the command's
// environment first (as os.UserCacheDir does on Linux) so that tests and
// wrappers can point it elsewhere.
func (c *linksCommand) cacheDir() (string, error) {
	if dir := c.main.Env("XDG_CACHE_HOME"); filepath.IsAbs(dir) {
		return dir, nil
	}
	return os.UserCacheDir()
}

// load returns the URL of the unfinished upload of this file, "" when
// there is none; stale is the URL of one of another version of the file.
func (s *uploadState) load() (url, stale string) {
	if s.path == "" {
		return "", ""
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return "", ""
	}
	var doc stateDoc
	if json.Unmarshal(b, &doc) != nil || doc.URL == "" {
		return "", ""
	}
	w := s.want
	if doc.File != w.File || doc.Size != w.Size || !doc.ModTime.Equal(w.ModTime) || doc.AdminURL != w.AdminURL {
		if doc.AdminURL == w.AdminURL {
			return "", doc.URL
		}
		return "", ""
	}
	return doc.URL, ""
}

// save records url as the file's unfinished upload, replacing the state
// file whole (rename) so that a crash never leaves half of one.
func (s *uploadState) save(url string) error {
	if s.path == "" {
		return s.err
	}
	doc := s.want
	doc.URL = url
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".state-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// remove forgets the upload, which is done.
func (s *uploadState) remove() {
	if s.path != "" {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.err = err
		}
	}
}
