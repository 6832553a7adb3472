//go:build tilefuse_cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

static int tf_set_max_dynamic_smem(CUfunction f, int bytes) {
	return (int)cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

static int tf_set_carveout(CUfunction f, int pct) {
	return (int)cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, pct);
}

static int tf_mem_host_alloc(void **p, size_t bytes) {
	return (int)cuMemHostAlloc(p, bytes, 0);
}

static int tf_mem_host_register(void *p, size_t bytes) {
	return (int)cuMemHostRegister(p, bytes, 0);
}

static int tf_mem_host_unregister(void *p) {
	return (int)cuMemHostUnregister(p);
}

static int tf_event_query(CUevent e) {
	return (int)cuEventQuery(e);
}

static int tf_smem_reserved(CUdevice d) {
	int v = 0;
	if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, d) != 0) {
		return 0;
	}
	return v;
}

static int tf_smem_optin(CUdevice d) {
	int v = 0;
	if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d) != 0) {
		return 0;
	}
	return v;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// setMaxDynamicShared raises f's dynamic shared memory limit (needed above 48 KB).
func setMaxDynamicShared(f cu.Function, bytes int) error {
	// cu.Function is a struct holding only its CUfunction handle.
	h := *(*C.CUfunction)(unsafe.Pointer(&f))
	if rc := C.tf_set_max_dynamic_smem(h, C.int(bytes)); rc != 0 {
		return fmt.Errorf("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %d): CUresult %d", bytes, int(rc))
	}
	return nil
}

// setCarveout sets f's preferred shared-memory carveout (percent of the
// SM's most shared memory; -1 no preference, the driver's choice).
func setCarveout(f cu.Function, pct int) error {
	h := *(*C.CUfunction)(unsafe.Pointer(&f))
	if rc := C.tf_set_carveout(h, C.int(pct)); rc != 0 {
		return fmt.Errorf("cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT, %d): CUresult %d", pct, int(rc))
	}
	return nil
}

// memHostAlloc allocates n bytes of page-locked host memory
// (cuMemHostAlloc, which cu lacks); free it with cu.MemFreeHost.
func memHostAlloc(n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if rc := C.tf_mem_host_alloc(&p, C.size_t(n)); rc != 0 {
		return nil, fmt.Errorf("cuMemHostAlloc(%d bytes): CUresult %d", n, int(rc))
	}
	return p, nil
}

// memHostRegister page-locks n bytes of host memory at p in place
// (cuMemHostRegister, which cu lacks), for asynchronous copies straight
// from it. p may be Go memory only while a runtime.Pinner pins it.
func memHostRegister(p unsafe.Pointer, n int64) error {
	if rc := C.tf_mem_host_register(p, C.size_t(n)); rc != 0 {
		return fmt.Errorf("cuMemHostRegister(%d bytes): CUresult %d", n, int(rc))
	}
	return nil
}

// memHostUnregister undoes memHostRegister(p, …).
func memHostUnregister(p unsafe.Pointer) error {
	if rc := C.tf_mem_host_unregister(p); rc != 0 {
		return fmt.Errorf("cuMemHostUnregister: CUresult %d", int(rc))
	}
	return nil
}

// eventDone reports whether the work before e's last record has completed
// (cuEventQuery, which cu lacks): CUDA_ERROR_NOT_READY is false, not an
// error.
func eventDone(e cu.Event) (bool, error) {
	// cu.Event is a struct holding only its CUevent handle.
	h := *(*C.CUevent)(unsafe.Pointer(&e))
	switch rc := C.tf_event_query(h); rc {
	case 0:
		return true, nil
	case 600: // CUDA_ERROR_NOT_READY
		return false, nil
	default:
		return false, fmt.Errorf("cuEventQuery: CUresult %d", int(rc))
	}
}

// sharedMemoryOptin is the most dynamic shared memory a kernel of device d
// may opt into (0 if the driver does not say).
func sharedMemoryOptin(d cu.Device) int {
	return int(C.tf_smem_optin(C.CUdevice(d)))
}

// sharedMemoryReserved is the shared memory the driver keeps for itself in
// every CTA (0 if the driver does not say).
func sharedMemoryReserved(d cu.Device) int {
	return int(C.tf_smem_reserved(C.CUdevice(d)))
}
