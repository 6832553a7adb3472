package main

import "flag"

// gpuBenchOpts are gpubench's flags. They are defined in both builds, so
// that help lists them where the command itself needs the CUDA build.
type gpuBenchOpts struct {
	reps   int
	warmMs float64
	only   string
}

func gpuBenchFlags() (*flag.FlagSet, *gpuBenchOpts) {
	o := &gpuBenchOpts{}
	fs := flag.NewFlagSet("gpubench", flag.ContinueOnError)
	fs.IntVar(&o.reps, "reps", 100, "timed launches, in batches of 10 (the median batch's time per launch is reported)")
	fs.Float64Var(&o.warmMs, "warmup-ms", 100, "device time to run each configuration before timing it (clocks ramp up under load)")
	fs.StringVar(&o.only, "run", "", "time only rows whose workload and config contain this (e.g. for ncu)")
	return fs, o
}
