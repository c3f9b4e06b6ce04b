//go:build cgo

#include "tb_dl.h"

#include <stdio.h>
#include <string.h>

#if defined(_WIN32)
#include <stdlib.h>
#include <windows.h>

void *tb_dl_open(const char *path, char *err, size_t errlen) {
	/* path is UTF-8 (a Go string): convert it for the wide-char API. */
	int n = MultiByteToWideChar(CP_UTF8, 0, path, -1, NULL, 0);
	wchar_t *wpath = n > 0 ? malloc((size_t)n * sizeof *wpath) : NULL;
	HMODULE lib = NULL;
	DWORD code = ERROR_INVALID_PARAMETER;
	if (wpath != NULL && MultiByteToWideChar(CP_UTF8, 0, path, -1, wpath, n) == n) {
		lib = LoadLibraryW(wpath);
		code = GetLastError();
	}
	free(wpath);
	if (lib == NULL) {
		char msg[256] = "";
		FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code, 0, msg, sizeof msg, NULL);
		msg[strcspn(msg, "\r\n")] = 0;
		snprintf(err, errlen, "%s: LoadLibrary: %s (error %lu)", path, msg, (unsigned long)code);
	}
	return (void *)lib;
}

void *tb_dl_sym(void *lib, const char *name) {
	FARPROC p = GetProcAddress((HMODULE)lib, name);
	void *q;
	/* A function pointer to a data pointer, as POSIX's dlsym returns. */
	memcpy(&q, &p, sizeof q);
	return q;
}

void tb_dl_close(void *lib) { FreeLibrary((HMODULE)lib); }

#else
#include <dlfcn.h>
#include <sys/stat.h>

/* dlerror's state is per thread: it is read in the same C call as dlopen,
 * so no other call on this thread can clear it in between.
 *
 * A library named by a path (not a bare name, which dlopen looks for in
 * the system's folders) that is there and is not a regular file is
 * refused first: dlopen would block on a FIFO for ever. */
void *tb_dl_open(const char *path, char *err, size_t errlen) {
	struct stat st;
	if (strchr(path, '/') != NULL && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file (%s)", path,
		         S_ISFIFO(st.st_mode) ? "a named pipe" : S_ISDIR(st.st_mode) ? "a directory" : "a device or socket");
		return NULL;
	}
	dlerror();
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char *msg = dlerror();
		snprintf(err, errlen, "%s", msg ? msg : "dlopen failed");
	}
	return lib;
}

void *tb_dl_sym(void *lib, const char *name) { return dlsym(lib, name); }

void tb_dl_close(void *lib) { dlclose(lib); }
#endif

void *tb_dl_load(const char *path, const tb_dl_symbol *syms, size_t n, void *table, char *err, size_t errlen) {
	void *lib = tb_dl_open(path, err, errlen);
	if (lib == NULL) {
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		void *sym = tb_dl_sym(lib, syms[i].name);
		if (sym == NULL) {
			snprintf(err, errlen, "%s: symbol %s not found", path, syms[i].name);
			tb_dl_close(lib);
			return NULL;
		}
		/* POSIX guarantees that a data pointer from dlsym converts to a
		 * function pointer (GetProcAddress returns one); every field of
		 * the table is a function pointer. */
		memcpy((char *)table + syms[i].offset, &sym, sizeof sym);
	}
	return lib;
}
