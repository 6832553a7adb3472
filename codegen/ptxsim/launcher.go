package ptxsim

import (
	"fmt"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
)

// Launcher lowers tile kernels with codegen and runs the PTX in the
// simulator on host buffers: a tiletest.Launcher, like the cuda package's,
// so that the conformance table runs here as it does on a GPU.
type Launcher struct {
	Arch     int // 80 or 90 (0: 90)
	NumWarps int // 0: the kernel's num_warps meta-parameter, else codegen's default
	// Racecheck and Initcheck turn on the shared-memory checks (Config).
	Racecheck, Initcheck bool
	// Workers is Config.Workers.
	Workers int
	// Last is the PTX of the last kernel launched (for failure messages).
	Last *codegen.Kernel
	// Edit, if set, rewrites the PTX before it runs: tests inject faults
	// with it (Last keeps the PTX as lowered)
	Edit func(ptx string) string
}

// Name says which target the launcher simulates.
func (l *Launcher) Name() string {
	arch := l.Arch
	if arch == 0 {
		arch = 90
	}
	return fmt.Sprintf("ptxsim:sm_%d", arch)
}

// Spec is the divisibility specialisation codegen gets for a launch, as the
// cuda launcher derives it: every buffer is 256-byte aligned here, and
// integers divisible by 16 are marked so.
func Spec(k *tile.Kernel, args []any) []int {
	spec := make([]int, len(k.Params))
	for i, p := range k.Params {
		if i >= len(args) {
			break
		}
		switch {
		case p.Type.Ptr:
			spec[i] = 16
		case p.Type.DType.IsInt():
			v, err := tile.ConvertScalar(args[i], tile.I64)
			if n, ok := v.(int64); err == nil && ok && n%16 == 0 {
				spec[i] = 16
			}
		}
	}
	return spec
}

// Launch compiles k for the launcher's target, copies the pointer arguments
// ([]float32, []float64, []int32) into simulated global memory, runs the
// grid and copies them back.
func (l *Launcher) Launch(k *tile.Kernel, grid tile.Grid, args ...any) error {
	if len(args) != len(k.Params) {
		return fmt.Errorf("ptxsim: @%s: %d arguments for %d parameters", k.Name, len(args), len(k.Params))
	}
	warps := l.NumWarps
	if warps == 0 {
		warps = k.Meta["num_warps"]
	}
	ck, err := codegen.Compile(k, codegen.Options{Arch: l.Arch, NumWarps: warps, Spec: Spec(k, args)})
	if err != nil {
		return err
	}
	l.Last = ck
	src := ck.PTX
	if l.Edit != nil {
		src = l.Edit(src)
	}
	mod, err := Parse(src)
	if err != nil {
		return err
	}
	mem := NewMemory()
	params := make([]any, len(args))
	addrs := make([]uint64, len(args))
	for i, p := range k.Params {
		if p.Type.Ptr {
			switch args[i].(type) {
			case []float32, []float64, []int32:
			default:
				return fmt.Errorf("ptxsim: @%s: argument %d (%s): %T is not a host buffer", k.Name, i, p.Name, args[i])
			}
			a, err := mem.AllocCopy(p.Name, args[i])
			if err != nil {
				return fmt.Errorf("ptxsim: @%s: argument %d (%s): %w", k.Name, i, p.Name, err)
			}
			params[i], addrs[i] = a, a
			continue
		}
		v, err := tile.ConvertScalar(args[i], p.Type.DType)
		if err != nil {
			return fmt.Errorf("ptxsim: @%s: argument %d (%s): %w", k.Name, i, p.Name, err)
		}
		params[i] = v
	}
	for _, tm := range ck.TensorMaps {
		b, err := encodeFor(tm, addrs[tm.Param], hostBytes(args[tm.Param]))
		if err != nil {
			return fmt.Errorf("ptxsim: @%s: %w", k.Name, err)
		}
		params = append(params, b)
	}
	g := [3]int(grid)
	if g[0] == 0 {
		return nil
	}
	cfg := Config{Grid: g, Block: [3]int{ck.Threads(), 1, 1}, DynamicShared: ck.SharedBytes, Racecheck: l.Racecheck, Initcheck: l.Initcheck, Workers: l.Workers}
	if err := mod.Launch(k.Name, cfg, mem, params...); err != nil {
		return err
	}
	for i, p := range k.Params {
		if p.Type.Ptr {
			if err := mem.Read(addrs[i], args[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeFor encodes codegen's tensor map tm for the argument at addr of
// bytes bytes, as the cuda launcher does with cuTensorMapEncodeTiled.
func encodeFor(tm codegen.TensorMap, addr uint64, bytes int64) ([]byte, error) {
	dims, strides, box, err := tm.Shape(bytes)
	if err != nil {
		return nil, err
	}
	return EncodeTensorMap(TensorMap{Addr: addr, ElemBytes: tm.ElemBytes, Dims: dims, Strides: strides, Box: box, Swizzle: tm.Swizzle})
}

// hostBytes is the size in bytes of a host buffer argument.
func hostBytes(x any) int64 {
	switch b := x.(type) {
	case []float32:
		return 4 * int64(len(b))
	case []float64:
		return 8 * int64(len(b))
	case []int32:
		return 4 * int64(len(b))
	}
	return 0
}
