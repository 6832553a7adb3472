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
	for _, c := range []peerCase{{"small", 70, 33, 90, false}, {"small gelu", 64, 50, 96, true}} {
		for _, prec := range tile.Precisions {
			p, err := buildPeer(c, graphpass.H200, prec, nil)
			require.NoError(t, err)
			args := make([]any, len(p.args))
			for i, a := range p.args {
				args[i] = a
			}
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
	_, err := parsePrecisions("ieee,bf17")
	require.ErrorContains(t, err, "bf17")
	tunes, err := parseTunes("BLOCK_N=256,num_stages=4; num_warps=4")
	require.NoError(t, err)
	require.Equal(t, []tile.Meta{nil, {"BLOCK_N": 256, "num_stages": 4}, {"num_warps": 4}}, tunes)
	_, err = parseTunes("BLOCK_N")
	require.ErrorContains(t, err, "name=integer")
}
