package diskcache_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/diskcache"
)

// TestKey: keys are hex SHA-256s of length-prefixed parts: the same parts
// give the same key, a moved boundary between parts another.
func TestKey(t *testing.T) {
	k := diskcache.Key("ptx", "NVIDIA H200", "12080")
	assert.Len(t, k, 64)
	assert.Equal(t, k, diskcache.Key("ptx", "NVIDIA H200", "12080"))
	assert.NotEqual(t, diskcache.Key("ab", "c"), diskcache.Key("a", "bc"))
	assert.NotEqual(t, diskcache.Key("a"), diskcache.Key("a", ""))
}

func TestPutGet(t *testing.T) {
	c := diskcache.Open(filepath.Join(t.TempDir(), "tilefuse"))
	key := diskcache.Key("x")
	_, ok := c.Get("cubin", key)
	assert.False(t, ok, "an empty cache")
	for _, data := range [][]byte{[]byte("module one"), {}, bytes.Repeat([]byte{0, 1, 2}, 100000)} {
		require.NoError(t, c.Put("cubin", key, data))
		got, ok := c.Get("cubin", key)
		require.True(t, ok)
		assert.Equal(t, data, got)
	}
	_, ok = c.Get("tune", key)
	assert.False(t, ok, "kinds are apart")
	for _, bad := range [][2]string{{"", key}, {"../x", key}, {"cubin", "../../etc"}, {"cubin", "ab"}} {
		assert.Error(t, c.Put(bad[0], bad[1], nil), "kind %q key %q", bad[0], bad[1])
		_, ok := c.Get(bad[0], bad[1])
		assert.False(t, ok)
	}
	var none *diskcache.Cache
	assert.NoError(t, none.Put("cubin", key, []byte("x")))
	_, ok = none.Get("cubin", key)
	assert.False(t, ok, "the nil cache holds nothing")
	assert.Nil(t, diskcache.Open(""))
}

// TestCorruptEntriesAreRebuilt: an entry cut short, with a byte changed,
// of another format, or with bytes appended is never returned: Get
// removes it and misses (Corrupt counts it), and a Put makes it whole.
func TestCorruptEntriesAreRebuilt(t *testing.T) {
	dir := t.TempDir()
	c := diskcache.Open(dir)
	data := []byte(strings.Repeat("cubin bytes ", 50))
	damage := map[string]func([]byte) []byte{
		"cut short":       func(b []byte) []byte { return b[:len(b)-7] },
		"a byte flipped":  func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b },
		"a header byte":   func(b []byte) []byte { b[3] ^= 1; return b },
		"empty":           func([]byte) []byte { return nil },
		"bytes appended":  func(b []byte) []byte { return append(b, 'x') },
		"only the header": func(b []byte) []byte { return b[:len(b)-len(data)] },
	}
	n := int64(0)
	for name, f := range damage {
		t.Run(name, func(t *testing.T) {
			key := diskcache.Key(name)
			require.NoError(t, c.Put("cubin", key, data))
			p := filepath.Join(dir, "cubin", key[:2], key)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, f(b), 0o644))
			got, ok := c.Get("cubin", key)
			assert.False(t, ok, "a damaged entry was returned: %q", got)
			n++
			assert.Equal(t, n, c.Corrupt.Load())
			_, err = os.Stat(p)
			assert.True(t, os.IsNotExist(err), "the damaged entry is removed")
			require.NoError(t, c.Put("cubin", key, data))
			got, ok = c.Get("cubin", key)
			assert.True(t, ok)
			assert.Equal(t, data, got)
		})
	}
}

// TestConcurrentWriters: writers of one key with different contents and
// readers at the same time: every read sees one whole content or none,
// never a mix or a part, and no temporary file is left.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	key := diskcache.Key("shared")
	contents := map[string]bool{}
	for i := range 8 {
		contents[strings.Repeat(fmt.Sprint(i), 1000*(i+1))] = true
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for data := range contents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := diskcache.Open(dir) // as another process would
			for range 20 {
				if err := c.Put("tune", key, []byte(data)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := diskcache.Open(dir)
			for range 200 {
				if got, ok := c.Get("tune", key); ok && !contents[string(got)] {
					errs <- fmt.Errorf("read %d bytes that no writer wrote", len(got))
					return
				}
			}
			if n := c.Corrupt.Load(); n > 0 {
				errs <- fmt.Errorf("%d reads saw a damaged entry", n)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, ok := diskcache.Open(dir).Get("tune", key)
	require.True(t, ok)
	assert.True(t, contents[string(got)])
	left, err := filepath.Glob(filepath.Join(dir, "tune", key[:2], ".tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "temporary files left behind")
}

func TestUsageAndClear(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tilefuse")
	c := diskcache.Open(dir)
	u, err := c.Usage()
	require.NoError(t, err)
	assert.Equal(t, diskcache.Usage{Kinds: map[string]int{}}, u, "a cache not yet written")
	require.NoError(t, c.Put("cubin", diskcache.Key("a"), make([]byte, 1000)))
	require.NoError(t, c.Put("tune", diskcache.Key("b"), make([]byte, 10)))
	u, err = c.Usage()
	require.NoError(t, err)
	assert.Equal(t, 2, u.Entries)
	assert.Greater(t, u.Bytes, int64(1010))
	assert.Equal(t, map[string]int{"cubin": 1, "tune": 1}, u.Kinds)
	require.NoError(t, c.Clear())
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err))
	u, err = c.Usage()
	require.NoError(t, err)
	assert.Zero(t, u.Entries)
}

func TestDirAndVersion(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/somewhere/cache")
	d, err := diskcache.Dir()
	require.NoError(t, err)
	assert.Equal(t, "/somewhere/cache/tilefuse", d)
	assert.Equal(t, d, diskcache.OpenDefault().Path())
	assert.NotEmpty(t, diskcache.Version())
}
