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

/* A function of a library's API: its name there, and where its address
 * goes in a table of function pointers. */
typedef struct {
	const char *name;
	size_t offset;
} tb_dl_symbol;

/* Opens the library at path and stores the address of each of the n
 * symbols at its offset in table. Returns the library, or NULL with the
 * reason in err (a missing symbol names itself; nothing stays open). */
void *tb_dl_load(const char *path, const tb_dl_symbol *syms, size_t n, void *table, char *err, size_t errlen);

#endif
