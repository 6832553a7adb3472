package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one of tilefuse's commands: its help and how to run it.
type command struct {
	name, args, summary string
	doc                 string               // the command's own help, above its flags
	flags               func() *flag.FlagSet // for help: the flags, unbound
	run                 func(args []string, stdout, stderr io.Writer) error
}

var commands []command // set in init: the commands' own help refers to it

func init() {
	commands = []command{{
		name: "bench", args: "[flags]", summary: "fused against unfused Gorgonia graphs (the default)",
		doc: `Measures the standard workloads (an elementwise chain, softmax, LayerNorm,
matmul + bias + GELU, attention forward and backward, an MLP training step,
alone and as a loop with Adam, a transformer encoder block forward and
forward + backward, Gorgonia's convnet example's training step; each small
and large; -size peer: the BERT-base layer
and long attention, without Gorgonia's machine) three ways:
Gorgonia's tape machine, tilefuse with fusion off (one kernel per op) and
tilefuse fused. Every fused result is checked against the unfused one first.
Prints a Markdown table on stdout and progress on stderr.`,
		flags: func() *flag.FlagSet { fs, _ := benchFlags(); return fs },
		run:   benchCmd,
	}, {
		name: "kernels", args: "[flags]", summary: "the conformance kernels on the CPU",
		doc: `Runs every conformance kernel on the CPU (the executor, or with -backend
interp the reference interpreter) and checks it against its float64
reference: prints one kernel's IR, then a table of every case.`,
		flags: func() *flag.FlagSet { fs, _ := kernelsFlags(); return fs },
		run:   func(args []string, stdout, _ io.Writer) error { return kernelsCmd(args, stdout) },
	}, {
		name: "gpubench", args: "[flags]", summary: "memory-bound kernels on the GPU (tilefuse_cuda build)",
		doc: `Times vector add, the GELU chain, softmax and LayerNorm on the GPU beside the
device's copy bandwidth measured in the same run, with each kernel's
registers, shared memory and spills. Needs the tilefuse_cuda build.`,
		flags: func() *flag.FlagSet { fs, _ := gpuBenchFlags(); return fs },
		run:   func(args []string, stdout, _ io.Writer) error { return gpuBench(args, stdout) },
	}, {
		name: "peer", args: "[flags]", summary: "matrix products at the peers' shapes on the GPU (tilefuse_cuda build)",
		doc: `Times the fusion pass's kernels for x·W and gelu(x·W + b) at 4096³ and at odd
shapes (1024³, 1000³, 1025³, 4095×4097×33, 4095×4097×4099, K = 50), the
BERT-base layer's products (NN, NT, TN) and vocabulary projections on the
GPU, per precision and -tune choice, each checked first against float64 on
rows spread over the output; a choice that cannot be written, compiled or
run is a row with its error. A case whose operands graphpass copies into
aligned rows first (pad kernels) is timed with its copies ("after N
copies"; TILEFUSE_PAD=0 turns them off). The same shapes run in PyTorch with
bench/torch/workloads.py --peer. Needs the tilefuse_cuda build.`,
		flags: func() *flag.FlagSet { fs, _ := peerFlags(); return fs },
		run:   func(args []string, stdout, _ io.Writer) error { return peerCmd(args, stdout) },
	}, {
		name: "tune", args: "[flags]", summary: "autotune a workload's kernels and keep the choices",
		doc: `Compiles one workload with fusion.WithAutotune: each kernel's candidate
meta-parameters (block sizes, rows a program, warps, chunks; the heuristic's
first) are written, run on seeded inputs, checked against the heuristic
kernel's outputs and timed on the backend, and the fastest is kept where it
beats the heuristic's by more than the noise; the choices go to the cache on
disk (tilefuse cache), where later compiles of the same kernels, in any
process, find them. Prints one row a kernel text (times of one launch, in
batches of launches on a GPU, and its inputs and outputs in GB/s); progress
on stderr. Measuring stops after -budget (25 s by default): every default is
measured first, then the kernels with the most time first; a candidate
whose first measurement is over 1.5x the best so far is measured no
further; kernels not reached keep their defaults, are marked in the table
and are measured by the next tune (the others come from the cache).`,
		flags: func() *flag.FlagSet { fs, _ := tuneFlags(); return fs },
		run:   tuneCmd,
	}, {
		name: "compare", args: "[flags]", summary: "tilefuse bench's JSON beside bench/torch's, turn by turn",
		doc: `Reads the JSON that tilefuse bench -json and bench/torch/workloads.py --json
wrote in turns on one machine (one file of each a turn, in the same order)
and prints, per workload and size, tilefuse's time in each turn beside
PyTorch's fastest mode in that turn (eager, library ops, torch.compile or
Triton's tutorial kernel, whichever ran), the ratio of the medians, and in
how many turns tilefuse was at least as fast. Times are the GPU's device
times where bench has them, else the wall clock, as workloads.py times each
device; a turn whose two files are of different devices (the CPU backend
against PyTorch on a GPU) is an error.`,
		flags: func() *flag.FlagSet { fs, _ := compareFlags(); return fs },
		run:   func(args []string, stdout, _ io.Writer) error { return compareCmd(args, stdout) },
	}, {
		name: "cache", args: "[clear]", summary: "where the cache on disk is and what it holds; clear empties it",
		doc: `Prints the directory of tilefuse's cache on disk (compiled GPU modules, which
a later process loads instead of compiling, and autotuning results) on the
first line, then its entries and size. 'tilefuse cache clear' removes it
and everything in it (the next compile on the GPU is cold again).`,
		flags: func() *flag.FlagSet { fs, _ := cacheFlags(); return fs },
		run:   func(args []string, stdout, _ io.Writer) error { return cacheCmd(args, stdout) },
	}, {
		name: "help", args: "[command]", summary: "this help, or one command's",
	}}
}

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "tilefuse %s: %v\nrun 'tilefuse help %s' for its flags\n", ue.cmd, ue.err, ue.cmd)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "tilefuse:", err)
		os.Exit(1)
	}
}

// run runs the command args name (bench when args start with a flag or are
// empty). Help goes to stdout: asking for it is not an error.
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && isHelp(args[0]) {
			writeHelp(stdout)
			return nil
		}
		return benchCmd(args, stdout, stderr)
	}
	name, rest := args[0], args[1:]
	if name == "help" {
		switch {
		case len(rest) == 0:
			writeHelp(stdout)
			return nil
		case len(rest) == 1:
			if c, ok := lookup(rest[0]); ok && c.flags != nil {
				writeCommandHelp(stdout, c)
				return nil
			}
		}
		return fmt.Errorf("help %s: no such command (have %s)", strings.Join(rest, " "), names())
	}
	c, ok := lookup(name)
	if !ok || c.run == nil {
		return fmt.Errorf("unknown command %q: want %s (run 'tilefuse help')", name, names())
	}
	return c.run(rest, stdout, stderr)
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h"
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func names() string {
	var ns []string
	for _, c := range commands {
		ns = append(ns, c.name)
	}
	return strings.Join(ns, ", ")
}

// writeHelp lists every command and every command's flags.
func writeHelp(w io.Writer) {
	fmt.Fprint(w, `tilefuse benchmarks Gorgonia graphs fused by tilefuse against Gorgonia's own
machine, and runs tilefuse's tile kernels.

Usage:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  tilefuse %-8s %-9s  %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprint(w, "\nWith no command, or only flags, tilefuse runs bench.\n")
	for _, c := range commands {
		if c.flags == nil {
			continue
		}
		fmt.Fprintf(w, "\nFlags of %s:\n", c.name)
		printFlags(w, c.flags())
	}
}

func writeCommandHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "Usage: tilefuse %s %s\n\n%s\n\nFlags:\n", c.name, c.args, c.doc)
	printFlags(w, c.flags())
}

func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// usageError is a command line a command cannot parse.
type usageError struct {
	cmd string
	err error
}

func (e usageError) Error() string { return fmt.Sprintf("%s: %v", e.cmd, e.err) }
func (e usageError) Unwrap() error { return e.err }

// parse parses a command's flags. -h (or -help) writes the command's help to
// out and reports done; a bad flag is a usageError.
func parse(fs *flag.FlagSet, args []string, out io.Writer) (done bool, err error) {
	fs.SetOutput(io.Discard)
	err = fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		c, _ := lookup(fs.Name())
		writeCommandHelp(out, c)
		return true, nil
	}
	if err != nil {
		return true, usageError{fs.Name(), err}
	}
	if fs.NArg() > 0 {
		return true, usageError{fs.Name(), fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	return false, nil
}
