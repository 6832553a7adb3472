package fusion_test

import (
	"fmt"
	"hash"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// panicky is a user's own elementwise op whose Do panics (as Gorgonia's
// ops do on bad input).
type panicky struct{}

func (panicky) Arity() int { return 1 }
func (panicky) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (panicky) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (panicky) Do(...G.Value) (G.Value, error) { panic("index out of range in a user op") }
func (panicky) ReturnsPtr() bool               { return false }
func (panicky) CallsExtern() bool              { return false }
func (panicky) OverwritesInput() int           { return -1 }
func (panicky) WriteHash(h hash.Hash)          { fmt.Fprint(h, "panicky") }
func (p panicky) Hashcode() uint32 {
	h := fnv.New32a()
	p.WriteHash(h)
	return h.Sum32()
}
func (panicky) String() string { return "panicky" }

// TestPanickingOpIsAnError: a Gorgonia op that panics inside the tape
// machine's own goroutine would end the program under Gorgonia's machine;
// under tilefuse's, RunAll returns an error naming it.
func TestPanickingOpIsAnError(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	y := G.Must(G.ApplyOp(panicky{}, G.Must(G.Exp(x))))
	G.Must(G.Add(y, G.NewConstant(1.0)))
	vm := fusion.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	if err := vm.Let(x, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))); err != nil {
		t.Fatal(err)
	}
	err := vm.RunAll()
	if err == nil || !strings.Contains(err.Error(), "panicky panicked: index out of range in a user op") {
		t.Fatalf("got %v, want the op's panic as an error", err)
	}
}
