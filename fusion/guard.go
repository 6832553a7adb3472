package fusion

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/ops"
)

// guard wraps a Gorgonia op replayed in a fused graph so that a panic in
// its Do becomes an error of RunAll, wherever it runs: the CUDA backend runs
// such ops on the device's thread, and Gorgonia's own tape machine (over
// Compiled().Graph) on a goroutine of its own, where a panic would end the
// program and no recover on the caller's side can stop it. The wrapper keeps
// the optional interfaces machines look for (UsePreallocDo, UnsafeDo); Gorgonia's
// statements (let, read), which its compiler recognises by type, are left
// as they are.
func guard(op G.Op) G.Op {
	if ops.IsStatement(op) {
		return op
	}
	g := guarded{op}
	_, pre := op.(G.UsePreallocDoer)
	_, uns := op.(G.UnsafeDoer)
	switch {
	case pre && uns:
		return guardedPreallocUnsafe{guardedPrealloc{g}}
	case pre:
		return guardedPrealloc{g}
	case uns:
		return guardedUnsafe{g}
	}
	return g
}

type guarded struct{ G.Op }

func recoverOp(err *error, op G.Op) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("fusion: Gorgonia's %v panicked: %v", op, r)
	}
}

func (o guarded) Do(vals ...G.Value) (v G.Value, err error) {
	defer recoverOp(&err, o.Op)
	return o.Op.Do(vals...)
}

type guardedPrealloc struct{ guarded }

func (o guardedPrealloc) UsePreallocDo(prealloc G.Value, vals ...G.Value) (v G.Value, err error) {
	defer recoverOp(&err, o.Op)
	return o.Op.(G.UsePreallocDoer).UsePreallocDo(prealloc, vals...)
}

type guardedUnsafe struct{ guarded }

func (o guardedUnsafe) UnsafeDo(vals ...G.Value) (v G.Value, err error) {
	defer recoverOp(&err, o.Op)
	return o.Op.(G.UnsafeDoer).UnsafeDo(vals...)
}

type guardedPreallocUnsafe struct{ guardedPrealloc }

func (o guardedPreallocUnsafe) UnsafeDo(vals ...G.Value) (v G.Value, err error) {
	defer recoverOp(&err, o.Op)
	return o.Op.(G.UnsafeDoer).UnsafeDo(vals...)
}
