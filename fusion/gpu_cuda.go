//go:build tilefuse_cuda

package fusion

import (
	"fmt"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/cuda"
)

func init() { newGPUBackend = openGPU }

// gpu runs a compiled graph on the GPU: values live in device buffers for the
// whole run; graph inputs go up, the values the user can read come down, and
// ops tilefuse does not know run on the CPU with copies (counted in the report).
type gpu struct {
	dev     *cuda.Device
	order   G.Nodes
	bufs    map[*G.Node]*cuda.Buffer
	loaded  map[*G.Node]*cuda.Function
	newOf   map[*G.Node]*G.Node // new node → original node
	hostOps int                 // launches of unknown ops on the CPU, last run
}

func openGPU(c *Compiled) (gpuBackend, error) {
	dev, err := cuda.Open(0)
	if err != nil {
		return nil, fmt.Errorf("fusion: %w", err)
	}
	sorted, err := G.Sort(c.Graph)
	if err != nil {
		return nil, fmt.Errorf("fusion: %w", err)
	}
	order := make(G.Nodes, 0, len(sorted))
	for i := len(sorted) - 1; i >= 0; i-- {
		order = append(order, sorted[i])
	}
	g := &gpu{dev: dev, order: order, bufs: map[*G.Node]*cuda.Buffer{}, loaded: map[*G.Node]*cuda.Function{}, newOf: map[*G.Node]*G.Node{}}
	for orig, nn := range c.rw.New {
		g.newOf[nn] = orig
	}
	return g, nil
}

func elemSize(n *G.Node) (int64, error) {
	switch n.Dtype() {
	case tensor.Float32:
		return 4, nil
	case tensor.Float64:
		return 8, nil
	}
	return 0, fmt.Errorf("fusion: node %v: dtype %v on the GPU backend", n.Name(), n.Dtype())
}

// buffer is n's device buffer, allocated once and reused across runs.
func (g *gpu) buffer(n *G.Node) (*cuda.Buffer, error) {
	if b, ok := g.bufs[n]; ok {
		return b, nil
	}
	es, err := elemSize(n)
	if err != nil {
		return nil, err
	}
	b, err := g.dev.Alloc(es * int64(max(1, n.Shape().TotalSize())))
	if err != nil {
		return nil, err
	}
	g.bufs[n] = b
	return b, nil
}

func (g *gpu) upload(n *G.Node, v G.Value) error {
	b, err := g.buffer(n)
	if err != nil {
		return err
	}
	h, err := hostSlice(v)
	if err != nil {
		return fmt.Errorf("fusion: %v: %w", n.Name(), err)
	}
	return g.dev.Upload(b, h)
}

func (g *gpu) download(n *G.Node) (G.Value, error) {
	b, ok := g.bufs[n]
	if !ok {
		return nil, fmt.Errorf("fusion: %v has no device value", n.Name())
	}
	size := max(1, n.Shape().TotalSize())
	var host any
	if n.Dtype() == tensor.Float64 {
		host = make([]float64, size)
	} else {
		host = make([]float32, size)
	}
	if err := g.dev.Download(host, b); err != nil {
		return nil, err
	}
	if n.IsScalar() {
		if h, ok := host.([]float64); ok {
			return G.NewF64(h[0]), nil
		}
		return G.NewF32(host.([]float32)[0]), nil
	}
	return tensor.New(tensor.WithShape(n.Shape().Clone()...), tensor.WithBacking(host)), nil
}

func isConst(n *G.Node) bool { return n.Op() != nil && strings.HasPrefix(n.Op().String(), "const ") }

// devBuf is n's device buffer; a constant goes up the first time it is needed.
func (g *gpu) devBuf(n *G.Node) (*cuda.Buffer, error) {
	if b, ok := g.bufs[n]; ok {
		return b, nil
	}
	if isConst(n) {
		if err := g.upload(n, n.Value()); err != nil {
			return nil, err
		}
		return g.bufs[n], nil
	}
	return nil, fmt.Errorf("fusion: %v has no device value", n.Name())
}

func operands(cg *G.ExprGraph, n *G.Node) G.Nodes {
	var out G.Nodes
	ch := cg.From(n.ID())
	for ch.Next() {
		out = append(out, ch.Node().(*G.Node))
	}
	return out
}

func (g *gpu) run(c *Compiled) error {
	g.hostOps = 0
	rw := c.rw
	isInput := map[*G.Node]bool{}
	for _, in := range rw.Inputs {
		nn := rw.New[in]
		isInput[nn] = true
		if in.Value() == nil {
			return fmt.Errorf("fusion: input %v has no value: Let it first", in.Name())
		}
		if err := g.upload(nn, in.Value()); err != nil {
			return err
		}
	}
	for _, n := range g.order {
		if isInput[n] {
			continue
		}
		args := operands(c.Graph, n)
		switch op := n.Op().(type) {
		case nil:
			return fmt.Errorf("fusion: node %v has no op and is not an input", n.Name())
		case *FusedOp:
			if op.IsView() { // a reshape: the same device memory
				b, err := g.devBuf(args[0])
				if err != nil {
					return err
				}
				g.bufs[n] = b
				continue
			}
			dev := make([]any, 0, len(args)+1)
			for _, a := range args {
				b, err := g.devBuf(a)
				if err != nil {
					return err
				}
				dev = append(dev, b)
			}
			out, err := g.buffer(n)
			if err != nil {
				return err
			}
			dev = append(dev, out)
			f, ok := g.loaded[n]
			if !ok {
				if _, f, err = g.dev.Compile(op.Kernel(), 4, dev); err != nil {
					return fmt.Errorf("fusion: %w", err)
				}
				g.loaded[n] = f
			}
			if err := g.dev.Launch(f, op.Kernel(), op.Grid(), dev...); err != nil {
				return fmt.Errorf("fusion: %w", err)
			}
		default:
			if isConst(n) {
				continue // uploaded when first needed
			}
			// an op tilefuse does not know: on the CPU, with copies
			vals := make([]G.Value, len(args))
			for i, a := range args {
				if isConst(a) {
					vals[i] = a.Value()
					continue
				}
				v, err := g.download(a)
				if err != nil {
					return err
				}
				vals[i] = v
			}
			v, err := op.Do(vals...)
			if err != nil {
				return fmt.Errorf("fusion: %v on the CPU: %w", n.Name(), err)
			}
			if err := g.upload(n, v); err != nil {
				return err
			}
			g.hostOps++
		}
	}
	if err := g.dev.Sync(); err != nil {
		return fmt.Errorf("fusion: %w", err)
	}
	for nn, orig := range g.newOf {
		if !c.read[orig] || isInput[nn] {
			continue
		}
		if isConst(nn) { // known on the host (SizeOf, folded constants)
			if v := nn.Value(); v != nil {
				if err := G.UnsafeLet(orig, v); err != nil {
					return fmt.Errorf("fusion: writing back %v: %w", orig.Name(), err)
				}
			}
			continue
		}
		v, err := g.download(nn)
		if err != nil {
			return err
		}
		if err := G.UnsafeLet(orig, v); err != nil {
			return fmt.Errorf("fusion: writing back %v: %w", orig.Name(), err)
		}
	}
	c.Report.HostOps = g.hostOps
	return nil
}

func (g *gpu) close() error {
	seen := map[*cuda.Buffer]bool{}
	for _, b := range g.bufs {
		if !seen[b] {
			seen[b] = true
			g.dev.Free(b)
		}
	}
	return g.dev.Close()
}
