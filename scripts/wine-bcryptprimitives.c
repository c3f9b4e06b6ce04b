/* bcryptprimitives.dll for Wine 8, which lacks it: Go >= 1.22 loads
 * ProcessPrng from it at start ("fatal error: bcryptprimitives.dll not
 * found"). scripts/platforms.sh builds this with mingw-w64 into the test
 * Wine prefix's system32; it is test tooling, never part of the library. */
#include <windows.h>
#include <ntsecapi.h> /* RtlGenRandom (advapi32's SystemFunction036) */

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!RtlGenRandom(data, n)) {
			return FALSE;
		}
		data += n;
		len -= n;
	}
	return TRUE;
}
