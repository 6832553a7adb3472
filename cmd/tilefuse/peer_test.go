package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestPeerKernelsAndCheck: peer's kernels, run by the reference
// interpreter at small shapes, pass its float64 check; an output with an
// element left unwritten or a wrong value fails it.
func TestPeerKernelsAndCheck(t *testing.T) {
	for _, c := range []peerCase{
		{name: "small", m: 70, k: 33, n: 90},
		{name: "small gelu", m: 64, k: 50, n: 96, gelu: true},
		{name: "small Aᵀ·B", m: 70, k: 33, n: 90, ta: true},
		{name: "small A·Bᵀ", m: 70, k: 33, n: 90, tb: true},
	} {
		for _, prec := range tile.Precisions {
			p, err := buildPeer(c, graphpass.H200, prec, nil)
			require.NoError(t, err)
			args := p.anyArgs()
			require.NoError(t, interp.Interpret(p.k.Tile, p.k.Grid, args...))
			got := p.args[len(p.args)-1]
			maxRel, normRel, bad := p.check(c, got, peerTol(prec))
			require.Zero(t, bad, "%s %v: max %.2g norm %.2g", c.name, prec, maxRel, normRel)
			require.Greater(t, maxRel, 0.0, "%s %v: an error of exactly 0 is not believable", c.name, prec)
			got[(c.m-1)*c.n+c.n-1] += 1
			_, _, bad = p.check(c, got, peerTol(prec))
			require.NotZero(t, bad, "%s %v: a wrong element passed", c.name, prec)
			got[(c.m-1)*c.n+c.n-1] = float32(math.NaN())
			_, _, bad = p.check(c, got, peerTol(prec))
			require.NotZero(t, bad, "%s %v: an unwritten element passed", c.name, prec)
		}
	}
	// SPLIT_K: the parts of K add into the zeroed output
	c := peerCase{name: "split", m: 70, k: 200, n: 90, ta: true}
	for _, prec := range []tile.Precision{tile.PrecIEEE, tile.PrecTF32} {
		p, err := buildPeer(c, graphpass.H200, prec, tile.Meta{"SPLIT_K": 3})
		require.NoError(t, err)
		require.True(t, p.k.Accumulates, "%v", prec)
		args := p.anyArgs()
		require.NoError(t, interp.Interpret(p.k.Tile, p.k.Grid, args...))
		maxRel, normRel, bad := p.check(c, p.args[len(p.args)-1], peerTol(prec))
		require.Zero(t, bad, "split %v: max %.2g norm %.2g", prec, maxRel, normRel)
	}
	_, err := parsePrecisions("ieee,bf17")
	require.ErrorContains(t, err, "bf17")
	tunes, err := parseTunes("BLOCK_N=256,num_stages=4; num_warps=4")
	require.NoError(t, err)
	require.Equal(t, []tile.Meta{nil, {"BLOCK_N": 256, "num_stages": 4}, {"num_warps": 4}}, tunes)
	_, err = parseTunes("BLOCK_N")
	require.ErrorContains(t, err, "name=integer")
}

// anyArgs are p's arguments as a launcher takes them.
func (p *peerKernel) anyArgs() []any {
	args := make([]any, len(p.args))
	for i, a := range p.args {
		args[i] = a
	}
	return args
}
