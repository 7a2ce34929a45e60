/*
 * Unlinked temporary files, for what does not fit in memory: request bodies
 * past body_buffer and responses spooled for slow clients. Nothing is left
 * behind if the worker dies.
 */
#ifndef ORIBI_TMPFILE_H
#define ORIBI_TMPFILE_H

#include <stddef.h>

/* An unlinked read-write file in dir (O_TMPFILE where there is one, else a
 * named file unlinked at once);
 * -1 with errno set. */
int oribi_tmpfile(const char *dir);

/* Writes all n bytes at the file's offset; 0, or -1 with errno set. */
int oribi_write_all(int fd, const char *p, size_t n);

#endif
