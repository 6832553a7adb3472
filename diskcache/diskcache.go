// Package diskcache is tilefuse's cache on disk, under
// os.UserCacheDir()/tilefuse: compiled GPU modules (cubins from the
// driver's linker) and autotuning results, so that a later process skips
// the work. Entries are files named by a key (Key: a SHA-256 of the
// parts that decide the content), one directory per kind of entry.
//
// It is safe against concurrent processes and against corruption: an
// entry is written to a temporary file in its directory and renamed into
// place (readers see the whole old entry or the whole new one), and each
// entry carries its length and the SHA-256 of its content, so that a
// truncated or damaged file is removed and reported as missing (the
// caller rebuilds it), never returned.
package diskcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
)

// Dir is the default cache directory: os.UserCacheDir()/tilefuse
// ($XDG_CACHE_HOME/tilefuse or ~/.cache/tilefuse on Linux).
func Dir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("diskcache: %w", err)
	}
	return filepath.Join(d, "tilefuse"), nil
}

// Cache is a cache directory. A nil *Cache is a cache that holds nothing:
// Get misses, Put does nothing.
type Cache struct {
	dir string
	// Corrupt counts the entries found damaged (and removed) by Get.
	Corrupt atomic.Int64
}

// Open is the cache in dir (created when first written). An empty dir is
// the nil cache.
func Open(dir string) *Cache {
	if dir == "" {
		return nil
	}
	return &Cache{dir: dir}
}

// OpenDefault is the cache in Dir(), or the nil cache where the system has
// no cache directory.
func OpenDefault() *Cache {
	d, err := Dir()
	if err != nil {
		return nil
	}
	return Open(d)
}

// Path is the cache's directory ("" for the nil cache).
func (c *Cache) Path() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// Key is the hex SHA-256 of the parts, each prefixed with its length (so
// that ("ab", "c") and ("a", "bc") differ).
func Key(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// magic starts every entry: the format's name and version.
const magic = "tilefuse-cache-1\n"

// header is magic, then the content's length (8 bytes, little-endian)
// and its SHA-256.
const header = len(magic) + 8 + sha256.Size

func (c *Cache) path(kind, key string) (string, error) {
	if kind == "" || strings.ContainsAny(kind, `/\.`) || len(key) < 3 || strings.ContainsAny(key, `/\.`) {
		return "", fmt.Errorf("diskcache: kind %q, key %q: want a plain name and a key of at least 3 characters (Key)", kind, key)
	}
	return filepath.Join(c.dir, kind, key[:2], key), nil
}

// Get is the content of the entry kind/key, if there is a whole one. A
// damaged entry (short, of another format, or whose content does not hash
// to its checksum) is removed and counted in Corrupt, and Get misses.
func (c *Cache) Get(kind, key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	p, err := c.path(kind, key)
	if err != nil {
		return nil, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	data, ok := decode(b)
	if !ok {
		c.Corrupt.Add(1)
		os.Remove(p)
		return nil, false
	}
	return data, true
}

func decode(b []byte) ([]byte, bool) {
	if len(b) < header || string(b[:len(magic)]) != magic {
		return nil, false
	}
	n := binary.LittleEndian.Uint64(b[len(magic):])
	sum := b[len(magic)+8 : header]
	data := b[header:]
	if uint64(len(data)) != n {
		return nil, false
	}
	got := sha256.Sum256(data)
	return data, bytes.Equal(got[:], sum)
}

func encode(data []byte) []byte {
	b := make([]byte, header, header+len(data))
	copy(b, magic)
	binary.LittleEndian.PutUint64(b[len(magic):], uint64(len(data)))
	sum := sha256.Sum256(data)
	copy(b[len(magic)+8:], sum[:])
	return append(b, data...)
}

// Remove removes the entry kind/key (a caller that found its content
// unusable: a module the driver refused).
func (c *Cache) Remove(kind, key string) {
	if c == nil {
		return
	}
	if p, err := c.path(kind, key); err == nil {
		os.Remove(p)
	}
}

// Put stores data as the entry kind/key: written to a temporary file in
// the entry's directory, then renamed over it, so that a reader in
// another process sees a whole entry or none, and two writers of the
// same key leave one whole entry.
func (c *Cache) Put(kind, key string, data []byte) error {
	if c == nil {
		return nil
	}
	p, err := c.path(kind, key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("diskcache: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("diskcache: %w", err)
	}
	_, werr := f.Write(encode(data))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("diskcache: writing %s/%s: %w", kind, key, err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("diskcache: %w", err)
	}
	return nil
}

// Usage is what the cache holds: entries and temporary files left by
// writers that did not finish, and their bytes.
type Usage struct {
	Entries int
	Bytes   int64
	Kinds   map[string]int // entries per kind ("cubin", "tune")
}

// Usage walks the cache directory (a missing one holds nothing).
func (c *Cache) Usage() (Usage, error) {
	u := Usage{Kinds: map[string]int{}}
	if c == nil {
		return u, nil
	}
	err := filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == c.dir {
				return fs.SkipAll
			}
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			u.Entries++
			u.Bytes += info.Size()
			if rel, err := filepath.Rel(c.dir, p); err == nil {
				kind, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
				u.Kinds[kind]++
			}
		}
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("diskcache: %w", err)
	}
	return u, nil
}

// Clear removes the cache directory and everything in it.
func (c *Cache) Clear() error {
	if c == nil {
		return nil
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("diskcache: %w", err)
	}
	return nil
}

// Version is tilefuse's version as the build records it: the module's
// version where tilefuse is a dependency, or its VCS revision (with
// "+dirty" for uncommitted changes) where it is the main module, else
// "(devel)". Keys of entries that depend on how tilefuse generates code
// include it.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	const path = "github.com/tilefuse/tilefuse"
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Version + " => " + d.Replace.Path + " " + d.Replace.Version
			}
			return d.Version
		}
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		return v + " " + rev + dirty
	}
	return v
}
