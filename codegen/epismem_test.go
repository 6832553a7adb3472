package codegen

import "testing"

// TestEpiSmemBanks: the swapped form's accumulator stored into the
// [m][n+epiPad] tile of epilogueThroughSmem, register by register, puts
// the 32 lanes of a warp in 32 different banks (a tile without the
// padding would be 4-way conflicted), and the canonical row-major layout's
// reads back are 16-byte aligned runs of 4 of one row.
func TestEpiSmemBanks(t *testing.T) {
	for _, c := range []struct {
		name    string
		m, n, w int
	}{
		{"256x128", 256, 128, 8},
		{"192x128", 192, 128, 8},
		{"64x128", 64, 128, 8},
		{"128x64", 128, 64, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			conflicts := func(pad int) int {
				acc := mmaLayout(c.n, c.m, c.w, 1) // of Cᵀ: [n, m]
				worst := 1
				for _, s := range acc.slots() {
					for warp := 0; warp < c.w; warp++ {
						count := map[int]int{}
						for lane := 0; lane < 32; lane++ {
							co := acc.coordOf(lane, warp, s) // (column of C, row of C)
							count[(co[1]*(c.n+pad)+co[0])%32]++
						}
						for _, k := range count {
							worst = max(worst, k)
						}
					}
				}
				return worst
			}
			if got := conflicts(epiPad); got != 1 {
				t.Errorf("padded by %d: %d lanes in one bank", epiPad, got)
			}
			if got := conflicts(0); got == 1 {
				t.Errorf("unpadded: no conflict, so the padding is not what avoids them")
			}
			to := newBlocked([]int{c.m, c.n}, c.w, 4)
			if to.SPT[1] != 4 || ((c.n+epiPad)*4)%16 != 0 {
				t.Errorf("row-major layout %s: runs of %d, row stride %d B", to.key(), to.SPT[1], (c.n+epiPad)*4)
			}
		})
	}
}
