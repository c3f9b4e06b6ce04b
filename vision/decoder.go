package vision

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
)

// Environment variables that steer the JPEG decoder.
const (
	EnvJPEG    = "TENSORBATCH_JPEG"     // auto (default), turbo or go
	EnvJPEGLib = "TENSORBATCH_JPEG_LIB" // a libjpeg path, tried instead of the default libraries
)

// jpegLibNames are the libjpeg-turbo libraries tried by default, in order:
// the libjpeg 6.2 ABI (Debian's libjpeg62-turbo), which has
// jpeg_crop_scanline and jpeg_skip_scanlines. A library of another ABI
// (libjpeg.so.8, or a Windows build whose boolean is a byte) is refused
// when it loads, by jpeg_CreateDecompress's struct-size check, and Go's
// decoder is used.
var jpegLibNames = jpegLibs()

func jpegLibs() []string {
	switch runtime.GOOS {
	case "windows":
		return []string{"jpeg62.dll", "libjpeg-62.dll"}
	case "darwin":
		return []string{"libjpeg.62.dylib"}
	}
	return []string{"libjpeg.so.62"}
}

// DecoderInfo says which JPEG decoder the package uses and why, as
// pinned.Selection does for backends.
type DecoderInfo struct {
	Name   string // "libjpeg-turbo" or "go"
	Reason string
}

func (d DecoderInfo) String() string { return fmt.Sprintf("%s (%s)", d.Name, d.Reason) }

// Turbo reports whether JPEGs are decoded by libjpeg-turbo.
func (d DecoderInfo) Turbo() bool { return d.Name == "libjpeg-turbo" }

var (
	decMu   sync.Mutex
	decDone bool
	decSel  DecoderInfo
	decLib  *jpegLib // nil unless libjpeg-turbo was loaded
)

// JPEGDecoderInfo returns the JPEG decoder chosen at first use: libjpeg-turbo
// loaded at run time ($TENSORBATCH_JPEG_LIB, else libjpeg.so.62 on linux,
// libjpeg.62.dylib on macOS, jpeg62.dll or libjpeg-62.dll on Windows),
// else Go's image/jpeg, with the reason. $TENSORBATCH_JPEG=go forces Go's
// decoder; turbo makes a failure to load libjpeg-turbo fatal for datasets
// (their constructors return it). The choice is logged once with
// log/slog.
func JPEGDecoderInfo() DecoderInfo {
	d, _, _ := jpegDecoder()
	return d
}

func jpegDecoder() (DecoderInfo, *jpegLib, error) {
	decMu.Lock()
	defer decMu.Unlock()
	if decDone {
		return decSel, decLib, decErr(decSel)
	}
	decDone = true
	decSel, decLib = selectDecoder(os.Getenv(EnvJPEG), os.Getenv(EnvJPEGLib))
	slog.Info("tensorbatch: JPEG decoder", "decoder", decSel.Name, "reason", decSel.Reason)
	return decSel, decLib, decErr(decSel)
}

func decErr(d DecoderInfo) error {
	if !d.Turbo() && os.Getenv(EnvJPEG) == "turbo" {
		return fmt.Errorf("vision: %s=turbo, but libjpeg-turbo is not usable: %s", EnvJPEG, d.Reason)
	}
	return nil
}

func selectDecoder(spec, path string) (DecoderInfo, *jpegLib) {
	switch spec {
	case "", "auto", "turbo":
	case "go":
		return DecoderInfo{"go", EnvJPEG + "=go"}, nil
	default:
		return DecoderInfo{"go", fmt.Sprintf("%s=%q is not auto, turbo or go; using Go's image/jpeg", EnvJPEG, spec)}, nil
	}
	libs := jpegLibNames
	if path != "" {
		libs = []string{path}
	}
	var why string
	for _, name := range libs {
		lib, err := openJPEGLib(name)
		if err == nil {
			return DecoderInfo{"libjpeg-turbo", name + " loaded"}, lib
		}
		if why != "" {
			why += "; "
		}
		why += err.Error()
	}
	return DecoderInfo{"go", why + "; using Go's image/jpeg"}, nil
}
