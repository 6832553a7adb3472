package cuda

import (
	"fmt"
	"strconv"
)

// Each SM's L1 cache and shared memory are one memory that the driver
// splits per kernel; a kernel's preferred carveout (the share kept as
// shared memory, in percent of the SM's most) is a hint to that split.
// tilefuse gives none by default: measured on the H200 (2026-12-03) the
// hint did not make the peer row graphs faster. The softmax 8192×4096 row
// kernel runs 70.6–71.1 µs or 67.5–68.3 µs a launch by what ran before it
// on the device, and no hint removed that: the least carveout that keeps
// the occupancy (auto, below) started at 70.7 like no hint at all did in
// some processes (68.2 in others), carveout 0 once started at 68.4 but
// left the bench's graph at 70.1 (and 32768×1024 at 71.7–72.2 µs against
// 66.7–67.5: fewer CTAs an SM), carveout 100 ran 71.5–72.3 throughout; the
// bench's large workloads moved within ±2.6% between auto and no hint.
//
// TILEFUSE_CARVEOUT sets it for measuring: unset or -1 no hint (the
// driver's choice), auto the least carveout that holds as many CTAs an SM
// as the occupancy without a hint allows (taken back if the occupancy then
// drops), 0–100 a fixed percentage for every kernel.

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

// carveoutSetting reads TILEFUSE_CARVEOUT's value: -1 (no hint) for ""
// and "-1", auto for "auto", else the fixed percentage.
func carveoutSetting(v string) (auto bool, pct int, err error) {
	switch v {
	case "":
		return false, -1, nil
	case "auto":
		return true, 0, nil
	}
	pct, err = strconv.Atoi(v)
	if err != nil || pct < -1 || pct > 100 {
		return false, 0, fmt.Errorf("cuda: TILEFUSE_CARVEOUT=%q: want auto, -1 (the driver's choice) or a percentage 0–100", v)
	}
	return false, pct, nil
}
