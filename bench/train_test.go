package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
)

// TestTrainStep: mlp_train's three modes each train their own copy of the
// learnables from the same start, so their first losses agree, and each
// mode's learnables moved away from the start (the solver stepped them),
// while the spec's own start values stay as they were.
func TestTrainStep(t *testing.T) {
	s, err := mlpTrain("small")
	require.NoError(t, err)
	start := map[*G.Node][]float32{}
	for _, n := range s.Train.Learnables {
		start[n] = append([]float32(nil), s.Inputs[n].Data().([]float32)...)
	}
	r, err := Graph(s, Options{Runs: 2, WarmUp: time.Millisecond})
	require.NoError(t, err)
	require.Len(t, r.Modes, 3)
	for _, m := range r.Modes {
		assert.Positive(t, m.Median, m.Mode)
		assert.Less(t, m.MaxErr, 1e-5, m.Mode)
	}
	for n, v := range start {
		assert.Equal(t, v, s.Inputs[n].Data().([]float32), "%s: the spec's start values are not trained", n.Name())
	}
	moved := false // the last mode's learnables, bound to the nodes
	for _, n := range s.Train.Learnables {
		moved = moved || !assert.ObjectsAreEqual(start[n], n.Value().Data())
	}
	assert.True(t, moved, "the learnables did not move: no solver step")
}

func TestTrainRejectsBadSpecs(t *testing.T) {
	s, err := mlpTrain("small")
	require.NoError(t, err)
	s.Train.Learnables = append(s.Train.Learnables, s.Outputs[0]) // the loss is no input
	_, err = Graph(s, Options{Runs: 1})
	assert.ErrorContains(t, err, "is not an input of the spec")
	s.Train = &Train{}
	_, err = Graph(s, Options{Runs: 1})
	assert.ErrorContains(t, err, "needs its loss, learnables and solver")
}
