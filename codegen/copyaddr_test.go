package codegen

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestCopyBaseRegisters: a pipelined loop's cp.async copies address global
// and shared memory from one base register per operand and iteration,
// with immediate offsets ([%rd+imm], [%r+imm]), where the load's pointer
// is affine in the block's coordinates: issue 10's 4095×4097×33 (4-byte
// copies of A and B, 16 a thread and operand at 128×128) had a 64-bit
// address and a tile offset per copy, 32 of each an iteration, their
// offsets live across the loop. Checked on the swapped form (the
// store-bound choice and 256×128), mma.sync on sm_80, and the aligned
// 16-byte copies; likewise the epilogue's stores and, with epi_smem = 1,
// its stores into and loads from shared memory (one base register each);
// per_slot_addr = 1, and the warp-specialised form (ws = 1: its
// setmaxnreg split was sized for the old form's registers,
// lowerer.perSlotAddr), keep one register an access.
// Every copy group (one iteration's
// copies, up to its commit or mbarrier arrive) holds as many copies as
// the tile needs.
func TestCopyBaseRegisters(t *testing.T) {
	copyRe := regexp.MustCompile(`cp\.async\.c[ag]\.shared\.global \[(%r\d+)(?:\+-?\d+)?\], \[(%rd\d+)(?:\+-?\d+)?\], (\d+),`)
	for _, c := range []struct {
		name    string
		m, n, k int
		bm      int
		arch    int
		extra   tile.Meta
		copies  int // a thread's copies an iteration (A and B)
		size    string
		groups  int // copy groups in the kernel: the prologue's and the loop's
		stores  int // the epilogue's stores a thread
		run     int // elements a load from shared memory (epi_smem)
	}{
		{"4095x4097x33 swapped 128x128 epi_smem", 4095, 4097, 33, 128, 90, tile.Meta{"epi_smem": 1, "num_stages": 3}, 32, "4", 3, 64, 1},
		{"4095x4097x33 swapped 128x128 epi_smem per_slot_addr", 4095, 4097, 33, 128, 90, tile.Meta{"epi_smem": 1, "num_stages": 3, "per_slot_addr": 1}, 32, "4", 3, 64, 1},
		{"4095x4097x33 swapped 256x128", 4095, 4097, 33, 256, 90, nil, 48, "4", 3, 128, 1},
		// the producer's 4 warps copy the tile: 96 copies a thread, one group
		// in its loop, each from its own registers (perSlotAddr)
		{"4095x4097x33 swapped ws 256x128", 4095, 4097, 33, 256, 90, tile.Meta{"ws": 1}, 96, "4", 1, 128, 1},
		{"4095x4097x33 mma.sync 128x128", 4095, 4097, 33, 128, 80, tile.Meta{"wgmma": 0, "num_stages": 3}, 32, "4", 2, 64, 1},
		{"4096x4096x32 swapped 128x128 epi_smem", 4096, 4096, 32, 128, 90, tile.Meta{"epi_smem": 1, "num_stages": 3}, 8, "16", 3, 16, 4},
		{"4096x4096x32 mma.sync 128x128", 4096, 4096, 32, 128, 80, tile.Meta{"wgmma": 0, "num_stages": 3}, 8, "16", 2, 32, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := maskedProduct(t, c.m, c.n, c.k, c.bm, c.extra)
			ck, err := Compile(k, Options{Arch: c.arch, NumWarps: 8, Spec: all16(k)})
			if err != nil {
				t.Fatal(err)
			}
			groups := 0
			src, dst, n := map[string]bool{}, map[string]bool{}, 0
			flush := func() {
				if n == 0 {
					return
				}
				groups++
				if n != c.copies {
					t.Errorf("group %d: %d copies, want %d", groups, n, c.copies)
				}
				// A's and B's: one base each (per_slot_addr = 1: one
				// register a copy, the old form)
				if c.extra["per_slot_addr"] == 1 || c.extra["ws"] == 1 {
					if len(src) != n || len(dst) != n {
						t.Errorf("group %d: %d copies from %d global address registers into %d shared ones, want %d each (per_slot_addr = 1)", groups, n, len(src), len(dst), n)
					}
				} else if len(src) > 2 || len(dst) > 2 {
					t.Errorf("group %d: %d copies from %d global address registers into %d shared ones, want at most 2 each", groups, n, len(src), len(dst))
				}
				src, dst, n = map[string]bool{}, map[string]bool{}, 0
			}
			for _, line := range strings.Split(ck.PTX, "\n") {
				if m := copyRe.FindStringSubmatch(line); m != nil {
					if m[3] != c.size {
						t.Fatalf("a %s-byte copy, want %s: %s", m[3], c.size, line)
					}
					dst[m[1]], src[m[2]] = true, true
					n++
					continue
				}
				if strings.Contains(line, "cp.async.commit_group") || strings.Contains(line, "cp.async.mbarrier.arrive") {
					flush()
				}
			}
			flush()
			if groups != c.groups {
				t.Errorf("%d copy groups, want %d", groups, c.groups)
			}
			// the epilogue's stores (4-byte where the output's rows are
			// odd) and its round trip through shared memory (epi_smem):
			// from one base register each
			epi := ck.PTX[max(strings.LastIndex(ck.PTX, "cp.async.wait_group 0"), strings.LastIndex(ck.PTX, "cp.async.wait_all")):]
			for _, a := range []struct {
				what string
				re   *regexp.Regexp
				want int // accesses a thread
			}{
				{"stores", regexp.MustCompile(`st\.global[.a-z0-9]* \[(%rd\d+)(?:\+-?\d+)?\]`), c.stores},
				{"stores into shared memory", regexp.MustCompile(`st\.shared\.f32 \[(%r\d+)(?:\+-?\d+)?\]`), map[bool]int{true: 64}[c.extra["epi_smem"] == 1]},
				{"loads from shared memory", regexp.MustCompile(`ld\.shared[.a-z0-9]*\.f32 [^[]*\[(%r\d+)(?:\+-?\d+)?\]`), map[bool]int{true: 64 / c.run}[c.extra["epi_smem"] == 1]},
			} {
				regs := map[string]bool{}
				ms := a.re.FindAllStringSubmatch(epi, -1)
				for _, m := range ms {
					regs[m[1]] = true
				}
				if len(ms) != a.want {
					t.Errorf("epilogue: %d %s, want %d", len(ms), a.what, a.want)
				}
				if c.extra["per_slot_addr"] == 1 || c.extra["ws"] == 1 {
					if len(regs) != len(ms) {
						t.Errorf("epilogue: %d %s from %d address registers, want %[1]d (per_slot_addr = 1)", len(ms), a.what, len(regs))
					}
				} else if len(regs) > 1 {
					t.Errorf("epilogue: %d %s from %d address registers, want 1", len(ms), a.what, len(regs))
				}
			}
		})
	}
}
