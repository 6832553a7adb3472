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

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

type kernelsOpts struct {
	filter, dump, show, backend string
	large, list                 bool
}

func kernelsFlags() (*flag.FlagSet, *kernelsOpts) {
	o := &kernelsOpts{}
	fs := flag.NewFlagSet("kernels", flag.ContinueOnError)
	fs.StringVar(&o.filter, "run", "", "run only cases whose name contains this")
	fs.BoolVar(&o.large, "large", false, "include the large cases")
	fs.StringVar(&o.dump, "dump", "", "write each kernel's IR to `dir`/NAME.tile")
	fs.BoolVar(&o.list, "list", false, "list the cases and exit")
	fs.StringVar(&o.show, "show", "vec_add/n=1000/BLOCK=128", "print the IR of this `case` first (\"\" for none)")
	fs.StringVar(&o.backend, "backend", "cpu", "run on `cpu` (the optimised executor, codegen/cpu) or interp (the reference interpreter, tile/interp)")
	return fs, o
}

// kernelsCmd runs every conformance kernel on the CPU, on the executor
// (codegen/cpu) or the reference interpreter (tile/interp), and checks it
// against its float64 reference.
func kernelsCmd(args []string, out io.Writer) error {
	fs, o := kernelsFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	filter, large, dump, list, show := &o.filter, &o.large, &o.dump, &o.list, &o.show
	launch := cpu.Run
	switch o.backend {
	case "cpu":
	case "interp":
		launch = interp.Interpret
	default:
		return usageError{fs.Name(), fmt.Errorf("-backend %q: want cpu or interp", o.backend)}
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
		err = launch(k, grid, argv...)
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
