package native

import (
	"os"
	"sort"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// Uniforms in registers (issue 16): a uniform operand (a scalar's frame
// splat, a pool constant) of a zmm loop is a {1to16} broadcast from memory
// in every instruction that reads it, a load a use: LayerNorm's last phase
// reads the mean and 1/σ so once a vector each, beside x, γ and β (five
// loads and a store a vector, where the load ports take two 512-bit loads
// a cycle). pinUniforms gives such uniforms registers of their own for the
// loop where the body leaves registers spare: broadcast once before the
// loop (in both banks where the loop is paired) and read as register
// operands. Only uniforms every use of which is the r/m operand of an add,
// a subtraction, a multiplication, a minimum or a maximum (which read it
// and write elsewhere) are pinned; the values are the same bits.

// noPinUniforms turns pinUniforms off (tests: export_test.go; measuring:
// TILEFUSE_NATIVE_PIN=0).
var noPinUniforms atomic.Bool

// pinUniforms chooses the uniforms of the unmasked zmm loop to keep in
// registers and marks those registers busy (unpin frees them).
func (pg *phaseGen) pinUniforms() map[*node]amd64.VReg {
	if noPinUniforms.Load() || pg.fast == nil {
		return nil
	}
	uses := map[*node]int{}
	bad := map[*node]bool{}
	need := 0
	live := 0 // values in registers before node i
	var order []*node
	for i, n := range pg.nodes {
		if !pg.fast.live[i] {
			continue
		}
		args := pg.fast.args(n)
		for k, a := range args {
			if a.op != opUniform {
				continue
			}
			if _, seen := uses[a]; !seen {
				order = append(order, a)
			}
			uses[a]++
			ok := a.v.Type.DType == tile.F32 && n.op == opCompute && memOK(n, k)
			switch n.v.Op {
			case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpMin, tile.OpMax:
			default:
				ok = false
			}
			if !ok {
				bad[a] = true
			}
		}
		// registers node i needs: the values live across it, its temps
		// and its result
		if w := live + tempsFor(n, pg.g.p.newton) + 1; w > need {
			need = w
		}
		if producesValue(n) && n.last > i {
			live++
		}
		for _, a := range args {
			if a.last == i && a.op != opUniform && producesValue(a) {
				live--
			}
		}
	}
	free := 0
	for r := 0; r < 16; r++ {
		if !pg.busy[r] {
			free++
		}
	}
	var cands []*node
	for _, u := range order {
		if !bad[u] {
			cands = append(cands, u)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return uses[cands[i]] > uses[cands[j]] })
	spare := free - need - 1 // one register of margin
	if spare <= 0 || len(cands) == 0 {
		return nil
	}
	pins := map[*node]amd64.VReg{}
	for _, u := range cands[:min(spare, len(cands))] {
		for r := 15; r >= 0; r-- {
			if !pg.busy[r] {
				pg.busy[r] = true
				pins[u] = amd64.VReg(r)
				break
			}
		}
	}
	return pins
}

// unpin frees the registers pins took.
func (pg *phaseGen) unpin(pins map[*node]amd64.VReg) {
	for _, r := range pins {
		pg.busy[r] = false
	}
}

func init() { noPinUniforms.Store(os.Getenv("TILEFUSE_NATIVE_PIN") == "0") }
