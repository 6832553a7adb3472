package cuda

import (
	"fmt"
	"strconv"
)

// Each SM's L1 cache and shared memory are one memory: the driver splits
// it per kernel, and a kernel's preferred carveout (the share of it kept
// as shared memory, in percent of the SM's most) is a hint to that split.
// Without one the split a kernel runs under depends on what ran before it
// on the SM: on the H200 (2026-12-03) the softmax 8192×4096 row kernel,
// with a few hundred bytes of shared memory a CTA, ran 71 µs until some
// other kernels had run in the process and 68 µs from then on; with the
// carveout at its most shared (100) 72 µs, at the least (0) 68 µs from
// the first launch. A memory-bound kernel's loads in flight wait in L1,
// so the L1 a split leaves is what such a kernel can have in flight.
//
// So every kernel is given the least carveout that still holds as many
// of its CTAs an SM as the driver's occupancy allows without a hint: the
// rest stays L1. TILEFUSE_CARVEOUT overrides it for measuring: "auto" or
// unset that rule, -1 no hint (the driver's own choice), 0–100 a fixed
// percentage for every kernel.

// carveoutFor is the least carveout, in percent of perSM (the SM's shared
// memory at most), that holds blocks CTAs of shared bytes each, every CTA
// also taking the reserved bytes the driver keeps for itself: -1 (no
// hint) where blocks or perSM is not positive.
func carveoutFor(blocks, shared, reserved, perSM int) int {
	if blocks <= 0 || perSM <= 0 {
		return -1
	}
	need := blocks * (shared + reserved)
	return min(100, (need*100+perSM-1)/perSM)
}

// carveoutSetting reads TILEFUSE_CARVEOUT's value: auto (the rule above)
// for "" and "auto", else the fixed percentage, -1 for the driver's choice.
func carveoutSetting(v string) (auto bool, pct int, err error) {
	if v == "" || v == "auto" {
		return true, 0, nil
	}
	pct, err = strconv.Atoi(v)
	if err != nil || pct < -1 || pct > 100 {
		return false, 0, fmt.Errorf("cuda: TILEFUSE_CARVEOUT=%q: want auto, -1 (the driver's choice) or a percentage 0–100", v)
	}
	return false, pct, nil
}
