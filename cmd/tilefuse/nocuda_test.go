//go:build !tilefuse_cuda

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBenchCUDANeedsTheCUDABuild: without the tag, -backend cuda and
// gpubench say how to get it rather than failing later.
func TestBenchCUDANeedsTheCUDABuild(t *testing.T) {
	var sb, progress strings.Builder
	assert.ErrorContains(t, benchCmd([]string{"-backend", "cuda", "-workload", "chain", "-size", "small"}, &sb, &progress), "tilefuse_cuda")
	assert.ErrorContains(t, run([]string{"gpubench"}, &sb, &progress), "tilefuse_cuda")
}
