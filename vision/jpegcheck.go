package vision

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// checkJPEG walks a whole JPEG before any of it is decoded: every marker
// segment, the entropy-coded data of every scan up to the marker that
// ends it, and the EOI marker that ends the image. libjpeg-turbo decodes
// only the rows a crop needs, so without this a file cut or damaged below
// them would decode in one epoch and fail in the next; with it, a file's
// validity does not depend on the crop, the mode or the decoder.
//
// It refuses, as ErrCorrupt: a file that ends before its EOI marker (any
// truncation), a segment that runs past the end, a second SOI or frame
// header, a scan before the frame header or no scan at all, a marker
// that neither decoder knows (libjpeg's JERR_UNKNOWN_MARKER), and restart
// markers out of sequence or without a restart interval (which libjpeg
// resynchronizes with the warning JWRN_MUST_RESYNC, an error here, and
// Go's decoder fails or skips). As libjpeg and Go do, it skips fill bytes
// and stray bytes between segments, and ignores what follows EOI.
// Damage that keeps the marker structure intact (flipped bits inside a
// scan) is not seen: it is found, or decoded as it is, where the decoder
// reaches it. The cost is one bytes.IndexByte pass over the file.
func checkJPEG(data []byte) error {
	i := 2 // after SOI
	frame, scans, interval := false, 0, 0
	for {
		for i < len(data) && data[i] != 0xff {
			i++ // stray bytes between segments: libjpeg warns and skips them
		}
		for i < len(data) && data[i] == 0xff {
			i++
		}
		if i >= len(data) {
			return fmt.Errorf("%w: JPEG of %d bytes ends without its EOI marker", ErrCorrupt, len(data))
		}
		m, at := data[i], i-1
		i++
		switch {
		case m == 0x00 || m == 0x01 || m >= 0xd0 && m <= 0xd7:
			continue // a stuffed zero outside a scan (skipped as stray bytes), TEM, RSTn: no length
		case m == 0xd9:
			if scans == 0 {
				return fmt.Errorf("%w: JPEG ends (EOI at byte %d) before its first scan", ErrCorrupt, at)
			}
			return nil // what follows EOI is ignored, as libjpeg ignores it
		case m == 0xd8:
			return fmt.Errorf("%w: JPEG has a second SOI marker at byte %d", ErrCorrupt, at)
		case !knownMarker(m):
			return fmt.Errorf("%w: JPEG has an unknown marker 0xFF%02X at byte %d", ErrCorrupt, m, at)
		}
		if i+2 > len(data) {
			return fmt.Errorf("%w: JPEG of %d bytes ends in the marker at byte %d", ErrCorrupt, len(data), at)
		}
		n := int(binary.BigEndian.Uint16(data[i:]))
		if n < 2 || i+n > len(data) {
			return fmt.Errorf("%w: JPEG segment 0xFF%02X of %d bytes at byte %d runs past the end (%d bytes)", ErrCorrupt, m, n, at, len(data))
		}
		seg := data[i+2 : i+n]
		i += n
		switch {
		case isSOF(m):
			if frame {
				return fmt.Errorf("%w: JPEG has a second frame header at byte %d", ErrCorrupt, at)
			}
			frame = true
		case m == 0xdd: // DRI
			if len(seg) != 2 {
				return fmt.Errorf("%w: JPEG restart interval of %d bytes at byte %d", ErrCorrupt, len(seg), at)
			}
			interval = int(binary.BigEndian.Uint16(seg))
		case m == 0xda: // SOS: the scan's entropy-coded data follows
			if !frame {
				return fmt.Errorf("%w: JPEG scan at byte %d before the frame header", ErrCorrupt, at)
			}
			scans++
			end, err := scanEnd(data, i, interval)
			if err != nil {
				return err
			}
			i = end
		}
	}
}

// scanEnd returns the offset of the 0xFF that starts the marker ending
// the entropy-coded data at data[i:]: not a stuffed zero (FF 00) nor a
// restart marker, which must come in sequence, RST0 first.
func scanEnd(data []byte, i, interval int) (int, error) {
	rst := 0
	for {
		k := bytes.IndexByte(data[i:], 0xff)
		if k < 0 {
			return 0, fmt.Errorf("%w: JPEG of %d bytes ends inside a scan, without its EOI marker", ErrCorrupt, len(data))
		}
		i += k + 1
		for i < len(data) && data[i] == 0xff {
			i++ // fill bytes
		}
		if i >= len(data) {
			return 0, fmt.Errorf("%w: JPEG of %d bytes ends inside a scan, without its EOI marker", ErrCorrupt, len(data))
		}
		switch c := data[i]; {
		case c == 0x00:
			i++
		case c >= 0xd0 && c <= 0xd7:
			if interval == 0 || int(c-0xd0) != rst%8 {
				return 0, fmt.Errorf("%w: JPEG restart marker RST%d at byte %d where %s", ErrCorrupt, c-0xd0, i-1, rstDue(interval, rst))
			}
			rst++
			i++
		default:
			return i - 1, nil
		}
	}
}

func rstDue(interval, rst int) string {
	if interval == 0 {
		return "no restart interval is defined"
	}
	return fmt.Sprintf("RST%d is due", rst%8)
}

// isSOF says whether m is a frame header (SOFn): C0-CF but DHT (C4), JPG
// (C8) and DAC (CC).
func isSOF(m byte) bool { return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc }

// knownMarker says whether libjpeg reads a segment of marker m (after the
// markers without a length): SOFn, DHT, DAC, SOS, DQT, DNL, DRI, APPn and
// COM.
func knownMarker(m byte) bool {
	return isSOF(m) || m == 0xc4 || m == 0xcc || (m >= 0xda && m <= 0xdd) || (m >= 0xe0 && m <= 0xef) || m == 0xfe
}
