//go:build !tilefuse_cuda

package main

import (
	"strings"
	"testing"
)

// TestBenchCUDANeedsTheCUDABuild: without the tag, -backend cuda says how to
// get it rather than failing later.
func TestBenchCUDANeedsTheCUDABuild(t *testing.T) {
	var sb, progress strings.Builder
	err := benchCmd([]string{"-backend", "cuda", "-workload", "chain", "-size", "small"}, &sb, &progress)
	if err == nil || !strings.Contains(err.Error(), "tilefuse_cuda") {
		t.Fatalf("got %v", err)
	}
}
