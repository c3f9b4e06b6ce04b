/* tb_dl: opening a shared library and finding its symbols at run time, the
 * one place that knows the platform's loader (dlopen on POSIX,
 * LoadLibrary on Windows). Used by the GPU runtimes (tb_runtime.c) and the
 * image decoders (tb_turbo.c). */
#ifndef TB_DL_H
#define TB_DL_H

#include <stddef.h>

/* Opens the library at path (a file name searched the platform's way, or a
 * path). Returns NULL and writes the loader's message into err on failure. */
void *tb_dl_open(const char *path, char *err, size_t errlen);

/* Returns the address of symbol name in lib, or NULL. */
void *tb_dl_sym(void *lib, const char *name);

void tb_dl_close(void *lib);

#endif
