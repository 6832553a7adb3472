package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/tilefuse/tilefuse/diskcache"
)

type cacheOpts struct{ dir string }

func cacheFlags() (*flag.FlagSet, *cacheOpts) {
	o := &cacheOpts{}
	fs := flag.NewFlagSet("cache", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "", "the cache `directory` (default: os.UserCacheDir()/tilefuse, the one tilefuse uses unless fusion.WithCacheDir says otherwise)")
	return fs, o
}

// cacheCmd prints where the cache on disk is and what it holds; with
// clear first, it empties it.
func cacheCmd(args []string, out io.Writer) error {
	clear := len(args) > 0 && args[0] == "clear"
	if clear {
		args = args[1:]
	}
	fs, o := cacheFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = diskcache.Dir(); err != nil {
			return err
		}
	}
	c := diskcache.Open(dir)
	u, err := c.Usage()
	if err != nil {
		return err
	}
	if clear {
		if err := c.Clear(); err != nil {
			return err
		}
		fmt.Fprintf(out, "cleared %s: %s\n", dir, describe(u))
		return nil
	}
	fmt.Fprintf(out, "%s\n%s\n", dir, describe(u))
	return nil
}

// describe says what u holds: entries, bytes, and entries per kind.
func describe(u diskcache.Usage) string {
	what := map[string]string{"cubin": "compiled GPU modules", "tune": "autotuning results"}
	var kinds []string
	for k, n := range u.Kinds {
		name := what[k]
		if name == "" {
			name = k
		}
		kinds = append(kinds, fmt.Sprintf("%d %s", n, name))
	}
	sort.Strings(kinds)
	s := fmt.Sprintf("%d entries, %s", u.Entries, bytesize(u.Bytes))
	if len(kinds) > 0 {
		s += " (" + strings.Join(kinds, ", ") + ")"
	}
	return s
}

func bytesize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
