//go:build tilefuse_cuda

package cuda

/*
#include <stdint.h>
#include <cuda.h>

// cuTensorMapEncodeTiled (CUDA 12's driver API) through cuGetProcAddress:
// CUDA 11.8's headers, which this package builds against, lack CUtensorMap
// and its enums, so the prototype is our own (the enums are ints, the map
// 128 bytes aligned to 64).
typedef CUresult (*tf_encode_tiled_fn)(void *map, int dtype, cuuint32_t rank, void *addr,
	const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
	const cuuint32_t *elemStrides, int interleave, int swizzle, int l2promo, int oobFill);

static tf_encode_tiled_fn tf_encode_fn;

static int tf_tensor_map_init(void) {
	void *p = 0;
	if (tf_encode_fn) {
		return 0;
	}
	CUresult rc = cuGetProcAddress("cuTensorMapEncodeTiled", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT);
	if (rc != CUDA_SUCCESS) {
		return (int)rc;
	}
	if (!p) {
		return -1;
	}
	tf_encode_fn = (tf_encode_tiled_fn)p;
	return 0;
}

// tf_tensor_map encodes a map of rank dimensions (dims in elements of
// dtype, the first contiguous; strides in bytes of the others), boxes of
// box, the swizzle mode (0 none, 1 32 B, 2 64 B, 3 128 B), L2 promotion of
// 128 bytes, zeros outside the tensor.
static int tf_tensor_map(void *map, int dtype, uint64_t addr, uint32_t rank, const uint64_t *dims, const uint64_t *strides,
	const uint32_t *box, int swizzle) {
	cuuint64_t d[5], st[4];
	cuuint32_t b[5], es[5];
	for (uint32_t i = 0; i < rank && i < 5; i++) {
		d[i] = dims[i];
		b[i] = box[i];
		es[i] = 1;
		if (i > 0) {
			st[i - 1] = strides[i - 1];
		}
	}
	return (int)tf_encode_fn(map, dtype, rank, (void *)(uintptr_t)addr, d, st, b, es, 0, swizzle, 2, 0);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/tilefuse/tilefuse/codegen"
)

// tensorMapBytes is a CUtensorMap's size; its alignment is 64.
const tensorMapBytes = 128

var (
	tmaOnce sync.Once
	tmaErr  error
)

// tmaEncoder finds cuTensorMapEncodeTiled in the driver (once).
func tmaEncoder() error {
	tmaOnce.Do(func() {
		if rc := C.tf_tensor_map_init(); rc != 0 {
			tmaErr = fmt.Errorf("cuda: cuTensorMapEncodeTiled not found in the driver (CUresult %d): tensor maps need a CUDA 12 driver", int(rc))
		}
	})
	return tmaErr
}

// checkTensorMap reports what keeps tm from being encoded for argument b
// (what cuTensorMapEncodeTiled would refuse, and a buffer shorter than the
// map's rows).
func checkTensorMap(tm codegen.TensorMap, b *Buffer) error {
	_, err := tensorMapRows(tm, b)
	return err
}

// tensorMapRows checks tm for argument b and returns its rows.
func tensorMapRows(tm codegen.TensorMap, b *Buffer) (int64, error) {
	if b == nil || b.Ptr == 0 {
		return 0, fmt.Errorf("cuda: %v: no buffer", tm)
	}
	rows, err := tm.RowsIn(b.Bytes)
	if err != nil {
		return 0, fmt.Errorf("cuda: %w", err)
	}
	stride := tm.Inner * int64(tm.ElemBytes)
	switch {
	case uint64(b.Ptr)%16 != 0:
		return 0, fmt.Errorf("cuda: %v: buffer at %#x is not 16-byte aligned", tm, uint64(b.Ptr))
	case rows < 1 || rows > 1<<32 || tm.Inner < 1 || tm.Inner > 1<<32:
		return 0, fmt.Errorf("cuda: %v: a buffer of %d bytes is %d rows", tm, b.Bytes, rows)
	case stride%16 != 0:
		return 0, fmt.Errorf("cuda: %v: rows %d bytes apart, not a multiple of 16", tm, stride)
	case tm.ElemBytes != 4:
		return 0, fmt.Errorf("cuda: %v: only 4-byte elements (float32)", tm)
	case tm.Swizzle != 0 && tm.Swizzle != 32 && tm.Swizzle != 64 && tm.Swizzle != 128:
		return 0, fmt.Errorf("cuda: %v: swizzle of %d bytes", tm, tm.Swizzle)
	}
	return rows, nil
}

// encodeTensorMap writes tm's CUtensorMap for argument b into dst (128
// bytes aligned to 64, C memory): rows of tm.Inner elements, as many as b
// holds (codegen.TensorMap.RowsIn), in tm.Shape's dimensions. On the device's thread: the driver
// wants the context current (CUresult 201 otherwise, seen on the H200).
func encodeTensorMap(dst unsafe.Pointer, tm codegen.TensorMap, b *Buffer) error {
	if err := tmaEncoder(); err != nil {
		return err
	}
	if uintptr(dst)%64 != 0 {
		return fmt.Errorf("cuda: tensor map at %p: not 64-byte aligned", dst)
	}
	if _, err := tensorMapRows(tm, b); err != nil {
		return err
	}
	mode := 0 // CU_TENSOR_MAP_SWIZZLE_NONE, 32B, 64B, 128B: 0 to 3
	switch tm.Swizzle {
	case 32:
		mode = 1
	case 64:
		mode = 2
	case 128:
		mode = 3
	}
	dims, strides, box, err := tm.Shape(b.Bytes)
	if err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	var cd, cs [5]C.uint64_t
	var cb [5]C.uint32_t
	for i := range dims {
		cd[i], cb[i] = C.uint64_t(dims[i]), C.uint32_t(box[i])
	}
	for i, x := range strides {
		cs[i] = C.uint64_t(x)
	}
	const float32Type = 7 // CU_TENSOR_MAP_DATA_TYPE_FLOAT32
	if rc := C.tf_tensor_map(dst, float32Type, C.uint64_t(b.Ptr), C.uint32_t(len(dims)), &cd[0], &cs[0], &cb[0], C.int(mode)); rc != 0 {
		return fmt.Errorf("cuda: %v: cuTensorMapEncodeTiled: CUresult %d", tm, int(rc))
	}
	return nil
}
