package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tilefuse:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "gpubench":
			return gpuBench(args[1:], out)
		case "kernels":
			return kernelsCmd(args[1:], out)
		case "bench":
			args = args[1:]
		default:
			if !strings.HasPrefix(args[0], "-") {
				return fmt.Errorf("unknown command %q: want bench (the default), kernels or gpubench", args[0])
			}
		}
	}
	return benchCmd(args, out, os.Stderr)
}

// kernelsCmd runs every conformance kernel on the CPU interpreter and checks
// it against its float64 reference.
func kernelsCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("tilefuse kernels", flag.ContinueOnError)
	filter := fs.String("run", "", "run only cases whose name contains this")
	large := fs.Bool("large", false, "include the large cases")
	dump := fs.String("dump", "", "write each kernel's IR to `dir`/NAME.tile")
	list := fs.Bool("list", false, "list the cases and exit")
	show := fs.String("show", "vec_add/n=1000/BLOCK=128", "print the IR of this `case` first (\"\" for none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var cases []tiletest.Case
	for _, c := range tiletest.Cases() {
		if strings.Contains(c.Name, *filter) && (*large || !c.Large) {
			cases = append(cases, c)
		}
	}
	if *list {
		for _, c := range cases {
			fmt.Fprintln(out, c.Name)
		}
		return nil
	}
	if len(cases) == 0 {
		return fmt.Errorf("no case matches %q", *filter)
	}
	if *dump != "" {
		if err := os.MkdirAll(*dump, 0o755); err != nil {
			return err
		}
	}
	for _, c := range cases {
		if c.Name != *show {
			continue
		}
		k, err := c.Kernel()
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		fmt.Fprintf(out, "IR of %s:\n\n%v\n", c.Name, k)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tgrid\tprograms\tvalues\ttime\tcheck")
	failed := 0
	for _, c := range cases {
		k, err := c.Kernel()
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if *dump != "" {
			name := strings.NewReplacer("/", "_", "=", "").Replace(c.Name) + ".tile"
			if err := os.WriteFile(filepath.Join(*dump, name), []byte(k.String()), 0o644); err != nil {
				return err
			}
		}
		grid, argv, check := c.Setup(tiletest.RNG(c.Name))
		t0 := time.Now()
		err = tile.Interpret(k, grid, argv...)
		dt := time.Since(t0)
		if err == nil {
			err = check()
		}
		verdict := "ok (float64 reference)"
		if err != nil {
			verdict = "FAIL: " + err.Error()
			failed++
		}
		g := grid
		programs := max(g[0], 0) * max(g[1], 1) * max(g[2], 1)
		fmt.Fprintf(tw, "%s\t%d×%d×%d\t%d\t%d\t%v\t%s\n", c.Name, g[0], max(g[1], 1), max(g[2], 1), programs, k.NumValues(), dt.Round(time.Microsecond), verdict)
	}
	tw.Flush()
	fmt.Fprintf(out, "\n%d passed, %d failed\n", len(cases)-failed, failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d cases failed", failed, len(cases))
	}
	return nil
}
