//go:build !tilefuse_cuda

package main

import (
	"errors"
	"io"
)

func gpuBench(args []string, out io.Writer) error {
	fs, _ := gpuBenchFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	return errors.New("gpubench needs the CUDA build: go build -tags tilefuse_cuda ./cmd/tilefuse (see README)")
}

func deviceCopyGBps() (float64, error) {
	return 0, errors.New("-backend cuda needs the CUDA build: go build -tags tilefuse_cuda ./cmd/tilefuse (see README)")
}
