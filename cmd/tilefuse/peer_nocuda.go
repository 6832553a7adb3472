//go:build !tilefuse_cuda

package main

import (
	"errors"
	"io"
)

func peerCmd(args []string, out io.Writer) error {
	fs, _ := peerFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	return errors.New("peer needs the CUDA build: go build -tags tilefuse_cuda ./cmd/tilefuse (see README)")
}
