//go:build amd64 && (linux || darwin || freebsd || netbsd || openbsd) && !purego

package jit

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	. "github.com/tilefuse/tilefuse/codegen/cpu/amd64"
)

func build(t *testing.T, emit func(a *Asm)) *Code {
	t.Helper()
	var a Asm
	emit(&a)
	b, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free() })
	return c
}

// sumCode returns the sum of n int64s: arg = {ptr, n}.
func sumCode(a *Asm) {
	a.MOVQload(RSI, Ptr(RDI, 0))
	a.MOVQload(RCX, Ptr(RDI, 8))
	a.XORQ(RAX, RAX)
	a.XORQ(RDX, RDX)
	loop, done := a.NewLabel(), a.NewLabel()
	a.Bind(loop)
	a.CMPQ(RDX, RCX)
	a.Jcc(CondGE, done)
	a.ADDQload(RAX, PtrIdx(RSI, RDX, 8, 0))
	a.ADDQimm(RDX, 1)
	a.JMP(loop)
	a.Bind(done)
	a.RET()
}

func TestCallSum(t *testing.T) {
	c := build(t, sumCode)
	for _, n := range []int{0, 1, 7, 1000} {
		xs := make([]int64, n)
		want := int64(0)
		for i := range xs {
			xs[i] = int64(i*i - 3)
			want += xs[i]
		}
		arg := struct {
			p unsafe.Pointer
			n int64
		}{unsafe.Pointer(unsafe.SliceData(xs)), int64(n)}
		got, ok := c.Call(unsafe.Pointer(&arg))
		runtime.KeepAlive(xs)
		if !ok || int64(got) != want {
			t.Errorf("n=%d: sum %d (ok %v), want %d", n, int64(got), ok, want)
		}
	}
}

// TestCallFMA runs 256-bit FMA code: d = a·b + c over 8 lanes, a constant
// c from the pool, and compares with the fused multiply-add in Go.
func TestCallFMA(t *testing.T) {
	c := build(t, func(a *Asm) {
		k := a.Data([]byte{0, 0, 0x80, 0x3f}, 4) // 1.0f
		a.MOVQload(RSI, Ptr(RDI, 0))
		a.MOVQload(RDX, Ptr(RDI, 8))
		a.MOVQload(RCX, Ptr(RDI, 16))
		a.VMOVUPS(0, Ptr(RSI, 0))
		a.VBROADCASTSS(2, At(k))
		a.VFMADD231PS(2, 0, Ptr(RDX, 0))
		a.VMOVUPSstore(Ptr(RCX, 0), 2)
		a.VZEROUPPER()
		a.XORL(RAX, RAX)
		a.RET()
	})
	x := []float32{1, 2, 3, 4, 1.0000001, -5, 1e30, 0.1}
	y := []float32{3, 0.5, -1, 1e-8, 0.9999999, 2, 1e10, 3}
	d := make([]float32, 8)
	arg := [3]unsafe.Pointer{unsafe.Pointer(&x[0]), unsafe.Pointer(&y[0]), unsafe.Pointer(&d[0])}
	if r, ok := c.Call(unsafe.Pointer(&arg)); !ok || r != 0 {
		t.Fatalf("call: %d %v", r, ok)
	}
	for i := range d {
		want := float32(fma32(x[i], y[i], 1))
		if d[i] != want {
			t.Errorf("lane %d: %v, want %v", i, d[i], want)
		}
	}
}

func fma32(a, b, c float32) float32 {
	return float32(float64(a)*float64(b) + float64(c)) // the product is exact in f64; no double rounding for these inputs
}

// TestClobberedABIRegisters: generated code may clobber R14 (g) and X15
// (Go's zero register) because it is entered through an ABI0 function;
// Go code after the call (allocation, zeroing, a deferred call) must
// still work.
func TestClobberedABIRegisters(t *testing.T) {
	c := build(t, func(a *Asm) {
		a.XORQ(R14, R14)
		a.VPCMPEQD(15, 15, VReg(15)) // all ones
		a.MOVQimm(RAX, 42)
		a.VZEROUPPER() // zeroes upper halves only: X15 stays all ones
		a.RET()
	})
	for i := 0; i < 100; i++ {
		r, _ := c.Call(nil)
		var zero [8]int64 // zeroed with X15 by the compiler
		s := fmt.Sprint(zero, r)
		func() { defer func() { s += "!" }() }()
		if s != "[0 0 0 0 0 0 0 0] 42!" {
			t.Fatalf("after the call: %q", s)
		}
	}
}

// TestCallUnderGC calls long-running code from several goroutines while
// another runs the garbage collector: the collector waits for each call
// (it cannot preempt generated code) and the results are right.
func TestCallUnderGC(t *testing.T) {
	c := build(t, sumCode)
	n := 1 << 20
	if testing.Short() {
		n = 1 << 16
	}
	xs := make([]int64, n)
	want := int64(0)
	for i := range xs {
		xs[i] = int64(i % 1000)
		want += xs[i]
	}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				arg := struct {
					p unsafe.Pointer
					n int64
				}{unsafe.Pointer(unsafe.SliceData(xs)), int64(len(xs))}
				got, _ := c.Call(unsafe.Pointer(&arg))
				if int64(got) != want {
					errs <- fmt.Sprintf("sum %d, want %d", int64(got), want)
					return
				}
				_ = make([]byte, 1<<10) // garbage
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	runtime.KeepAlive(xs)
}

// TestWXorX checks that the code's pages are mapped read+execute, not
// writable (Linux: /proc/self/maps).
func TestWXorX(t *testing.T) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps here")
	}
	defer f.Close()
	c := build(t, sumCode)
	at := c.Entry()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		var perm string
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x %s", &lo, &hi, &perm); err != nil {
			continue
		}
		if lo <= at && at < hi {
			if !strings.HasPrefix(perm, "r-x") {
				t.Fatalf("code mapped %s, want r-x", perm)
			}
			return
		}
	}
	t.Fatalf("no mapping holds the code at %#x", at)
}

func TestFree(t *testing.T) {
	var a Asm
	sumCode(&a)
	b, _ := a.Finish()
	c, err := New(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Call(nil); ok {
		t.Error("call of freed code ran")
	}
	if err := c.Free(); err == nil {
		t.Error("second Free: no error")
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil): no error")
	}
}

func TestSupported(t *testing.T) {
	if !Supported() {
		t.Skip("this CPU lacks AVX2/FMA: the generated code would not run")
	}
}

// TestIntel: Intel() agrees with the vendor Linux reports in /proc/cpuinfo.
func TestIntel(t *testing.T) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		t.Skip("no /proc/cpuinfo to check CPUID's vendor against: ", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "vendor_id" {
			vendor := strings.TrimSpace(v)
			if got := Intel(); got != (vendor == "GenuineIntel") {
				t.Fatalf("Intel() = %v, /proc/cpuinfo's vendor_id %q", got, vendor)
			}
			return
		}
	}
	t.Skip("no vendor_id in /proc/cpuinfo")
}
