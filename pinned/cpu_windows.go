package pinned

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

const lockAdvice = "VirtualLock refused them (the minimum working set could not grow: SetProcessWorkingSetSize)"

func mapPages(size int) ([]byte, error) {
	p, err := windows.VirtualAlloc(0, uintptr(size), windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE)
	if err != nil {
		return nil, fmt.Errorf("VirtualAlloc %d bytes: %w", size, err)
	}
	return unsafe.Slice((*byte)(unsafe.Add(nil, p)), size), nil
}

// workingSet serializes the changes of the process's working set size.
var workingSet sync.Mutex

// lockPages locks b after growing the process's minimum working set by
// len(b): Windows locks no more pages than that minimum holds.
func lockPages(b []byte) error {
	workingSet.Lock()
	defer workingSet.Unlock()
	if err := growWorkingSet(len(b)); err != nil {
		return fmt.Errorf("SetProcessWorkingSetSizeEx: %w", err)
	}
	if err := windows.VirtualLock(addrOf(b), uintptr(len(b))); err != nil {
		growWorkingSet(-len(b))
		return fmt.Errorf("VirtualLock: %w", err)
	}
	return nil
}

func growWorkingSet(delta int) error {
	h := windows.CurrentProcess()
	var lo, hi uintptr
	var flags uint32
	windows.GetProcessWorkingSetSizeEx(h, &lo, &hi, &flags)
	return windows.SetProcessWorkingSetSizeEx(h, uintptr(int(lo)+delta), uintptr(int(hi)+delta), flags)
}

// unmapPages frees b; if it was locked, the working set shrinks back.
func unmapPages(b []byte) error {
	workingSet.Lock()
	defer workingSet.Unlock()
	if windows.VirtualUnlock(addrOf(b), uintptr(len(b))) == nil {
		growWorkingSet(-len(b))
	}
	if err := windows.VirtualFree(addrOf(b), 0, windows.MEM_RELEASE); err != nil {
		return fmt.Errorf("VirtualFree: %w", err)
	}
	return nil
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
